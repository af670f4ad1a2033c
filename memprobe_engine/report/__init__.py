"""Reports of protocol-A runs: frames read from recordings, the paper's tables, rendering, exports.

``load_frames`` folds one or more recordings into flat pandas frames (latest score per case wins);
``build_tables`` computes Tables 2, 3, 4, 13 and 14 from them as numeric DataFrames;
``print_tables`` shows them in the terminal; ``memprobe_engine.exports`` writes them as files.
"""

from memprobe_engine.report.frames import ReportFrames, load_frames
from memprobe_engine.report.render import fmt_mean_std, print_tables, render
from memprobe_engine.report.tables import (TABLES, build_tables, category_means, parse_table_names, table2,
                                           table3, table4, table13, table14, user_b)

__all__ = ["ReportFrames", "load_frames", "TABLES", "build_tables", "parse_table_names", "category_means",
           "user_b", "table2", "table3", "table4", "table13", "table14", "render", "print_tables",
           "fmt_mean_std"]
