"""Case modules, grouped by theme; importing this package registers them all."""

from . import masks, score_mods, gqa, shapes, models, dtypes  # noqa: F401
from . import realworld_masks, realworld_scores, realworld_captures  # noqa: F401
