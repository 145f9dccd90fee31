"""fastpe's precision="float32" RoPE frequencies against transformers' own
ROPE_INIT_FUNCTIONS, over the configurations tests/test_rope.py generates: per
rule, the most float32 ulps apart, how many configurations have an entry more
than one ulp apart, and the share of bitwise-equal entries.  Needs torch and
transformers (requirements-frameworks.txt).
    python tools/rope_ulps.py [CONFIGS_PER_RULE]
"""

import sys
from collections import defaultdict
from importlib.metadata import version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import transformers
from test_rope import float32_ulps, generated_configs, transformers_frequencies

import fastpe


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    transformers.logging.set_verbosity_error()
    worst: dict[str, int] = defaultdict(int)
    over_one: dict[str, int] = defaultdict(int)
    equal: dict[str, list[np.ndarray]] = defaultdict(list)
    for rope_type, params, head_dim, mpe, seq_len in generated_configs(n):
        inv, _ = transformers_frequencies(rope_type, params, head_dim, mpe, seq_len)
        w, _ = fastpe.rope_frequencies(
            head_dim,
            {"rope_type": rope_type, **params},
            max_position_embeddings=mpe,
            seq_len=seq_len,
        )
        u = float32_ulps(w, inv)
        worst[rope_type] = max(worst[rope_type], int(u.max()))
        over_one[rope_type] += int(u.max() > 1)
        equal[rope_type].append(u == 0)
    print(" | ".join(f"{p} {version(p)}" for p in ("fastpe", "numpy", "torch", "transformers")))
    print(f"{'rope_type':10s} {'configs':>7s} {'max ulps':>8s} {'>1 ulp':>7s} {'bitwise':>8s}")
    for rt, eq in equal.items():
        e = np.concatenate(eq)
        print(f"{rt:10s} {len(eq):7d} {worst[rt]:8d} {over_one[rt]:7d} {100 * e.mean():7.2f}%")
    e = np.concatenate([np.concatenate(v) for v in equal.values()])
    print(f"all entries: {100 * e.mean():.2f}% bitwise ({e.size})")


if __name__ == "__main__":
    main()
