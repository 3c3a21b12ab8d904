//! What a measured number is: the one registry format every workload's result type, the runner
//! and the emulator declare their metrics in, and that reports read their labels, units and
//! directions from (never guessed from which keys a run happens to have).

use serde::Serialize;

/// Whether smaller or larger values of a metric are better (decides improvements, wins and the
/// sign of paired comparisons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// One metric as declared by whoever measures it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricDef {
    /// Key in a run's metrics, e.g. `total_ms`.
    pub name: &'static str,
    /// Human-readable name, e.g. "Download time".
    pub label: &'static str,
    /// Unit for axes and tables, e.g. "ms"; empty for dimensionless metrics.
    pub unit: &'static str,
    pub better: Better,
    /// A time to completion (download time, page load time): a run that hit its time limit took
    /// at least that long, so its value is censored, not missing.
    pub completion: bool,
    /// When the metric has no value by its own definition (e.g. a share of dropped packets when
    /// nothing was dropped): such a null is not a failed measurement, and verdicts count it apart.
    /// None: a null always means the measurement failed.
    pub undefined_when: Option<&'static str>,
    /// The value that means "no effect" (1 for a ratio of one side to the other): a magnitude
    /// band around another value may not contain it, or the claim could hold with no effect.
    pub no_effect: Option<f64>,
    /// What the run was (connections opened), not how well it went: reports show it and draw
    /// no improvement over a baseline for it.
    #[serde(skip)]
    pub descriptive: bool,
}

impl MetricDef {
    pub const fn lower(name: &'static str, label: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            label,
            unit,
            better: Better::Lower,
            completion: false,
            undefined_when: None,
            no_effect: None,
            descriptive: false,
        }
    }

    /// A lower-is-better time to completion ([`MetricDef::completion`]).
    pub const fn completion_time(
        name: &'static str,
        label: &'static str,
        unit: &'static str,
    ) -> Self {
        MetricDef {
            completion: true,
            ..MetricDef::lower(name, label, unit)
        }
    }

    pub const fn higher(name: &'static str, label: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            label,
            unit,
            better: Better::Higher,
            completion: false,
            undefined_when: None,
            no_effect: None,
            descriptive: false,
        }
    }

    /// The same metric, whose value `v` means no effect (1 for a ratio of two sides).
    pub const fn no_effect_at(self, v: f64) -> Self {
        MetricDef {
            no_effect: Some(v),
            ..self
        }
    }

    /// The same metric, as a description of the run ([`MetricDef::descriptive`]).
    pub const fn descriptive(self) -> Self {
        MetricDef {
            descriptive: true,
            ..self
        }
    }

    /// The same metric, declared undefined (not failed) in the case `why` names.
    pub const fn undefined_when(self, why: &'static str) -> Self {
        MetricDef {
            undefined_when: Some(why),
            ..self
        }
    }

    /// A run's time limit in this metric's unit: the bound a timed-out run's value is censored
    /// at. None for a metric that is not a time to completion (its value is simply unknown) or
    /// whose unit is not a time.
    pub fn censored_at(&self, limit_s: f64) -> Option<f64> {
        if !self.completion || !limit_s.is_finite() {
            return None;
        }
        match self.unit {
            "ms" => Some(limit_s * 1e3),
            "s" => Some(limit_s),
            _ => None,
        }
    }

    pub fn lower_is_better(&self) -> bool {
        self.better == Better::Lower
    }
}

/// One metric of a result type `R`, as one row: its declaration and how its value is read from a
/// result. A metric cannot be declared without a value nor valued without a declaration; adding
/// one is its row (and the field it reads, if new).
pub struct Metric<R: 'static> {
    pub def: MetricDef,
    /// The run's value (None: not measured in this run, or undefined; see
    /// [`MetricDef::undefined_when`]).
    pub value: fn(&R) -> Option<f64>,
}

impl<R> Metric<R> {
    pub const fn of(def: MetricDef, value: fn(&R) -> Option<f64>) -> Metric<R> {
        Metric { def, value }
    }
}

// Derived, these would ask `R: Clone`; a row is a declaration and a function pointer.
impl<R> Clone for Metric<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Metric<R> {}

impl<R> std::fmt::Debug for Metric<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Metric").field(&self.def.name).finish()
    }
}

/// A value measured as a float, NaN where it was not (another implementation did not tell it).
pub fn measured(v: f64) -> Option<f64> {
    Some(v).filter(|v| !v.is_nan())
}

/// A yes/no as 1 or 0.
pub fn flag(b: bool) -> Option<f64> {
    Some(f64::from(u8::from(b)))
}

/// The definition of `name` in `registry`, if declared.
pub fn find<'a>(registry: &'a [MetricDef], name: &str) -> Option<&'a MetricDef> {
    registry.iter().find(|m| m.name == name)
}

/// Names declared twice in `registry` (a registry must declare each name once).
pub fn duplicates(registry: &[MetricDef]) -> Vec<&'static str> {
    let mut seen = std::collections::BTreeSet::new();
    registry
        .iter()
        .filter(|m| !seen.insert(m.name))
        .map(|m| m.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_duplicates() {
        let r = [
            MetricDef::lower("total_ms", "Download time", "ms"),
            MetricDef::higher("goodput_mbps", "Goodput", "Mbit/s"),
            MetricDef::lower("total_ms", "again", "ms"),
        ];
        assert!(find(&r, "goodput_mbps").is_some_and(|m| !m.lower_is_better()));
        assert!(find(&r, "nope").is_none());
        assert_eq!(duplicates(&r), ["total_ms"]);
    }
}
