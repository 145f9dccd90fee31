"""A pytest plugin that runs transformers' own model tests with fastpe.torch in
place of the rotary code, loaded by tools/transformers_model_tests.sh with
``-p fastpe_transformers_plugin`` (this folder on PYTHONPATH).

With FASTPE_PATCH=1 every transformers model is sent through
``fastpe.torch.patch_model`` right after it is built (at the end of
``PreTrainedModel.post_init``, so ``from_pretrained``'s models are patched on
the meta device), and each listed family's ``apply_rotary_pos_emb`` is
``fastpe.torch.apply_rotary_pos_emb``.  Without it the plugin does nothing:
the same command gives the unpatched baseline.  FASTPE_PATCH_LOG names a file
that gets one line per rotary module patched ("replaced") or left alone (the
reason).

A tests tree a little older or newer than the installed transformers can name
helpers that moved; the shared mixins import them at the top, so one missing
name stops a whole family's tests from being collected.  Each name in
``MOVED`` that the installed transformers lacks is given a stand-in that
raises when called (in both runs alike): the few tests that use it fail both
ways, and the rest run.
"""

from __future__ import annotations

import importlib
import os

import pytest

_FILLED = pytest.StashKey[list]()

FAMILIES = ("llama", "qwen2", "mistral", "gemma", "phi3", "gpt_neox", "qwen2_vl")

# (module, name) pairs the FSDP and tensor-parallel mixins of transformers' tests
# import at the top, and which the releases since have renamed or removed
MOVED = (
    ("transformers.distributed.fsdp", "expand_fsdp_plan"),
    ("transformers.distributed.utils", "load_optimizer_distributed"),
    ("transformers.distributed.utils", "save_optimizer_distributed"),
    ("transformers.integrations.tensor_parallel", "_get_parameter_tp_plan"),
)


def _stand_in(module: str, name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"{module}.{name} is not in the installed transformers")

    missing.__name__ = name
    return missing


def _fill_moved() -> list[str]:
    filled = []
    for module_name, name in MOVED:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if not hasattr(module, name):
            setattr(module, name, _stand_in(module_name, name))
            filled.append(f"{module_name}.{name}")
    return filled


def pytest_configure(config):
    filled = _fill_moved()
    if filled:
        config.stash[_FILLED] = filled
    if os.environ.get("FASTPE_PATCH") != "1":
        return
    import transformers

    import fastpe.torch as ft

    log = os.environ.get("FASTPE_PATCH_LOG")
    built = transformers.PreTrainedModel.post_init

    def post_init(self, *args, **kwargs):
        built(self, *args, **kwargs)
        report = ft.patch_model(self, warn=False)
        if log and (report or report.skipped):
            with open(log, "a", encoding="utf-8") as f:
                for name in report:
                    f.write(f"{type(self).__name__}\t{name}\treplaced\n")
                for name, why in report.skipped.items():
                    f.write(f"{type(self).__name__}\t{name}\t{why}\n")

    transformers.PreTrainedModel.post_init = post_init
    for family in FAMILIES:
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        if hasattr(module, "apply_rotary_pos_emb"):
            module.apply_rotary_pos_emb = ft.apply_rotary_pos_emb


def pytest_report_header(config):
    filled = config.stash.get(_FILLED, [])
    patched = "patched" if os.environ.get("FASTPE_PATCH") == "1" else "unpatched"
    lines = [f"fastpe plugin: {patched}"]
    if filled:
        lines.append("stand-ins for names this transformers lacks: " + ", ".join(filled))
    return lines
