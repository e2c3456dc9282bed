"""Case modules, grouped by theme; importing this package registers them all."""

from . import masks, score_mods, gqa, shapes, models, dtypes  # noqa: F401
