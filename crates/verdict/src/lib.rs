//! The sans-IO core of `quiclab reproduce` (issue 24, made a reviewer's by issue 37): every finding
//! of a seed study as data ([`findings`]: `studies/STUDY.toml`, each a reproduction or a
//! calibration), the runs that judge it paired by repetition and every other setting across the
//! compared axis ([`judge::pair`]), and its verdict by a stated rule ([`judge`], [`rules`]: exact
//! sign test, Wilcoxon signed-rank, the exact order-statistic interval of a median or of a
//! per-pair ratio, a minimum effect for comparisons, Megyesi et al. 2016's wins rule per setting
//! and its decision tree, [`tree`]). A run that hit its time limit is censored in the metric's
//! unit, failed and missing runs are counted, never dropped, and a metric undefined by its own
//! definition is counted apart. Verdicts are computed, never written by hand: holds, does not
//! hold (reversed, or not shown with enough informative pairs — a straddling threshold interval
//! included), inconclusive (too few informative pairs, > 5 % failed or missing runs, an interval
//! that straddles a band or cannot reach its level, a significant effect too small to matter whose
//! interval reaches beyond the margin, a quick form), not runnable.
//!
//! Pure functions on fixed data, unit-tested; the shells (reading a results database, running
//! the packs, writing reproduction.html) come on top.

pub mod cells;
pub mod compare;
pub mod explain;
pub mod findings;
pub mod judge;
pub mod outcome;
pub mod prose;
pub mod rules;
pub mod study;
pub mod tree;

pub use findings::{Finding, Judged, Study};
pub use judge::{Claim, Judgement, Rule, RunValue, Scope, SettingWinners, Test, Verdict};
pub use outcome::{FindingVerdict, verdict_word};
pub use rules::{Better, Observed};
pub use tree::Tree;
