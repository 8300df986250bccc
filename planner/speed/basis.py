"""Where a speed figure comes from (its basis), and how wide its range is.

Every figure says its basis: `measured` (this machine's probe), `learned` (calibrated by the
speed of real replies: the median of measured / predicted), `table` (a spec-sheet or
what-if figure, not timed here), `measuring` (the CPU's figures are not trusted yet: the
probe that would give them was disturbed, app/speed/trust.py) or `unknown`. A figure is always a range: +-30% when
measured (the error bench/speed_predict.py saw before any learning), +-50% from a table,
and from learning the spread of the replies' ratios, never narrower than
`MIN_LEARNED_BAND`, widened while fewer than `ENOUGH_REPLIES` replies exist.
"""

from __future__ import annotations

MEASURED, LEARNED, TABLE, UNKNOWN = "measured", "learned", "table", "unknown"
PENDING = "measuring"  # the CPU's figures are being measured: no figure until they are trusted
BASIS_ORDER = (UNKNOWN, PENDING, TABLE, MEASURED, LEARNED)  # weakest first

# bands (half-widths as a fraction of the figure)
MEASURED_BAND = 0.30
TABLE_BAND = 0.50
MIN_LEARNED_BAND = 0.05
ENOUGH_REPLIES = 3
MAX_RATIOS = 20  # the newest replies a calibration keeps
