"""RoPE rules as the models' configurations write them (transformers'
``rope_parameters``), written once for every test that uses them.  A test that
varies one spells the change where it uses it: ``{**LLAMA31, "factor": 2.0}``.
Nothing may change these dicts in place: they are shared by many tests."""

# Llama 3.1 (8B, 70B, 405B): the "llama3" rule
LLAMA31 = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
# Llama 3.2 (1B, 3B): the same rule with factor 32
LLAMA32 = {**LLAMA31, "factor": 32.0}
# Llama 4 Scout: equal low and high factors (no band between kept and divided)
LLAMA4 = {**LLAMA31, "factor": 16.0, "high_freq_factor": 1.0}

# Small rules of each family at the default rope_theta, for the tests of refusals,
# which change one field at a time
YARN4K = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LLAMA3_8K = {k: v for k, v in LLAMA31.items() if k != "rope_theta"}
LONGROPE4 = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [1.0] * 4,
    "original_max_position_embeddings": 4096,
    "factor": 2.0,
}
