"""A pytest plugin that runs transformers' own model tests with fastpe.torch in
place of the rotary code, loaded by tools/transformers_model_tests.sh with
``-p fastpe_transformers_plugin`` (this folder on PYTHONPATH).

With FASTPE_PATCH=1 every transformers model is sent through
``fastpe.torch.patch_model`` right after it is built (at the end of
``PreTrainedModel.post_init``, so ``from_pretrained``'s models are patched on
the meta device), and each listed family's ``apply_rotary_pos_emb`` is
``fastpe.torch.apply_rotary_pos_emb``.  Without it the plugin does nothing:
the same command gives the unpatched baseline.  FASTPE_PATCH_LOG names a file
that gets one line per rotary module left alone, with the reason.
"""

from __future__ import annotations

import importlib
import os

FAMILIES = ("llama", "qwen2", "mistral", "gemma", "phi3", "gpt_neox", "qwen2_vl")


def pytest_configure(config):
    if os.environ.get("FASTPE_PATCH") != "1":
        return
    import transformers

    import fastpe.torch as ft

    log = os.environ.get("FASTPE_PATCH_LOG")
    built = transformers.PreTrainedModel.post_init

    def post_init(self, *args, **kwargs):
        built(self, *args, **kwargs)
        report = ft.patch_model(self, warn=False)
        if log and report.skipped:
            with open(log, "a", encoding="utf-8") as f:
                for name, why in report.skipped.items():
                    f.write(f"{type(self).__name__}\t{name}\t{why}\n")

    transformers.PreTrainedModel.post_init = post_init
    for family in FAMILIES:
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        if hasattr(module, "apply_rotary_pos_emb"):
            module.apply_rotary_pos_emb = ft.apply_rotary_pos_emb
