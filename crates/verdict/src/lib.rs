//! The sans-IO core of `quiclab reproduce` (issue 24): every finding of a seed study as data
//! ([`findings`]: `studies/STUDY.toml`), the runs that judge it paired by repetition and every
//! other setting across the compared axis ([`judge::pair`]), and its verdict by a stated rule
//! ([`judge`], [`rules`]: exact sign test, Wilcoxon signed-rank, bootstrap interval of a median or
//! of a per-pair ratio, Megyesi et al. 2016's wins rule per setting and its decision tree,
//! [`tree`]),
//! with a run that hit its time limit treated as censored and failed runs counted, never dropped.
//! Verdicts are computed, never written by hand: holds, does not hold (reversed or absent),
//! inconclusive (n too small, > 5 % failures, an interval that straddles), not runnable.
//!
//! Pure functions on fixed data, unit-tested; the shells (reading a results database, running
//! the packs, writing reproduction.html) come on top.

pub mod findings;
pub mod judge;
pub mod outcome;
pub mod rules;
pub mod tree;

pub use findings::{Finding, Judged, Study};
pub use judge::{Claim, Judgement, Rule, RunValue, SettingWinners, Test, Verdict};
pub use outcome::{FindingVerdict, verdict_word};
pub use rules::{Better, Observed};
pub use tree::Tree;
