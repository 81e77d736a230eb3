"""File paths that name the same file from any working folder: what a RunConfig keeps beyond the
command that made it (the window's settings, a trace's config) must not depend on the folder the
command ran in."""

from __future__ import annotations

import os
from dataclasses import replace

from lstmviz.core import modes
from lstmviz.core.config import FILE_FIELDS


def absolute(path: str) -> str:
    """`path` joined to the working folder and normalised. Symbolic links are not followed: a
    linked file keeps the name it was given (a model cache's link, not its blob's hash)."""
    return os.path.abspath(path) if path else path


def listed_weights(config, name: str) -> bool:
    """Whether field `name` of `config` may list several files, comma-separated: the weights
    of a mode that reads one file per unit (`Mode.lists_weight_files`)."""
    return name == "weights" and modes.find(config.mode).lists_weight_files


def absolute_config(config):
    """A copy of the RunConfig `config` whose file fields are absolute paths (a per-batch
    weights list, comma-separated in per-batch mode: each file of it)."""
    changed = {}
    for name in FILE_FIELDS:
        value = getattr(config, name)
        if value:
            listed = value.split(",") if listed_weights(config, name) else [value]
            changed[name] = ",".join(absolute(part) for part in listed)
    return replace(config, **changed)

