//! Time-varying link profiles: a sequence of steps, each holding a rate, a one-way delay
//! and a random-loss probability for a duration.
//!
//! A profile is applied to one direction of the link; its `delay` is that direction's
//! one-way delay and its `loss` that direction's Bernoulli loss. After the last step the
//! profile either starts over (`repeat = true`, the default) or holds the last step
//! forever (`repeat = false`).
//!
//! # TOML format
//!
//! ```toml
//! # quiclab link profile
//! name = "np2b-typical"       # optional (default: the file name without extension)
//! repeat = true               # optional, default true
//! [[step]]
//! duration = "30s"            # > 0
//! rate = "1.5mbit"            # or "unlimited"
//! delay = "100ms"             # optional, default "0ms"
//! loss = "0.12%"              # optional, default 0
//! ```
//!
//! Unknown keys are errors, so a typo cannot silently fall back to a default.
//!
//! # CSV format
//!
//! A header line exactly `duration,rate,delay,loss`, then one row per step with the same
//! value syntax (`30s,1.5mbit,100ms,0.12%`); an empty delay or loss field means the
//! default. Blank lines and lines starting with `#` are ignored. CSV profiles repeat.
//!
//! Every parse error is reported as `FILE:LINE: message`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::Nanos;
pub use crate::error::ParseError;
use crate::error::line_of_offset;
use crate::units::{parse_duration, parse_probability, parse_rate};

/// One step of a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileStep {
    /// How long the step lasts (> 0).
    pub duration: Nanos,
    /// Bottleneck rate in bits per second; `None` means unlimited.
    pub rate_bps: Option<u64>,
    /// One-way propagation delay of the direction the profile is applied to.
    pub delay: Nanos,
    /// Bernoulli loss probability, within [0, 1].
    pub loss: f64,
}

/// A time-varying link profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Name used in reports.
    pub name: String,
    /// The steps, in order.
    pub steps: Vec<ProfileStep>,
    /// `true`: start over after the last step; `false`: hold the last step forever.
    pub repeat: bool,
}

/// Returned by [`Profile::step_at`] for a hand-built profile without steps, so that the
/// lookup never panics: an unconstrained link.
static NO_STEP: ProfileStep = ProfileStep {
    duration: 0,
    rate_bps: None,
    delay: 0,
    loss: 0.0,
};

impl Profile {
    /// The length of one pass through all steps.
    pub fn cycle_duration(&self) -> Nanos {
        self.steps
            .iter()
            .fold(0u64, |total, step| total.saturating_add(step.duration))
    }

    /// Index of the step in force at `t`, relative to the profile's start; `None` only for
    /// a profile without steps.
    pub fn step_index_at(&self, t: Nanos) -> Option<usize> {
        let last = self.steps.len().checked_sub(1)?;
        let cycle = self.cycle_duration();
        if cycle == 0 {
            return Some(last);
        }
        let offset = if t < cycle {
            t
        } else if self.repeat {
            t % cycle
        } else {
            return Some(last);
        };
        let mut step_end = 0u64;
        for (index, step) in self.steps.iter().enumerate() {
            step_end = step_end.saturating_add(step.duration);
            if offset < step_end {
                return Some(index);
            }
        }
        Some(last)
    }

    /// The step in force at `t`, relative to the profile's start, honouring `repeat`
    /// (wrap around) or hold-last.
    pub fn step_at(&self, t: Nanos) -> &ProfileStep {
        match self.step_index_at(t) {
            Some(index) => &self.steps[index],
            None => &NO_STEP,
        }
    }

    /// Time-weighted mean rate over one cycle, in bits per second; infinite when any step
    /// is unlimited (the mean of an unlimited rate is unlimited).
    pub fn mean_rate_bps(&self) -> f64 {
        let cycle = self.cycle_duration();
        if cycle == 0 {
            return 0.0;
        }
        let mut bit_nanos: u128 = 0;
        for step in self.steps.iter().filter(|step| step.duration > 0) {
            match step.rate_bps {
                Some(bps) => bit_nanos += u128::from(bps) * u128::from(step.duration),
                None => return f64::INFINITY,
            }
        }
        bit_nanos as f64 / cycle as f64
    }

    /// Time-weighted mean one-way delay over one cycle, rounded to the nearest nanosecond.
    pub fn mean_delay(&self) -> Nanos {
        let cycle = u128::from(self.cycle_duration());
        if cycle == 0 {
            return 0;
        }
        let weighted: u128 = self
            .steps
            .iter()
            .map(|step| u128::from(step.delay) * u128::from(step.duration))
            .sum();
        ((weighted + cycle / 2) / cycle) as Nanos
    }

    /// Time-weighted mean loss probability over one cycle.
    pub fn mean_loss(&self) -> f64 {
        let cycle = self.cycle_duration();
        if cycle == 0 {
            return 0.0;
        }
        let weighted: f64 = self
            .steps
            .iter()
            .map(|step| step.loss * step.duration as f64)
            .sum();
        weighted / cycle as f64
    }

    /// Checks the invariants the parsers guarantee, for profiles built by hand.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.steps.is_empty() {
            return Err("it has no steps".to_string());
        }
        for (index, step) in self.steps.iter().enumerate() {
            let number = index + 1;
            if step.duration == 0 {
                return Err(format!("step {number} has a duration of 0"));
            }
            if step.rate_bps == Some(0) {
                return Err(format!(
                    "step {number} has a rate of 0 bit/s (use None for unlimited)"
                ));
            }
            if !(0.0..=1.0).contains(&step.loss) {
                return Err(format!(
                    "step {number} has a loss of {}, outside [0, 1]",
                    step.loss
                ));
            }
        }
        Ok(())
    }
}

/// The raw step values as text, shared by the TOML and CSV readers so both accept
/// exactly the same syntax.
struct StepText<'a> {
    duration: &'a str,
    rate: &'a str,
    delay: Option<&'a str>,
    loss: Option<&'a str>,
}

/// Which field of a step was wrong, and why.
struct StepError {
    field: &'static str,
    message: String,
}

fn parse_step(text: &StepText<'_>) -> Result<ProfileStep, StepError> {
    let field_error = |field: &'static str| {
        move |e: crate::units::UnitError| StepError {
            field,
            message: e.to_string(),
        }
    };
    let duration = parse_duration(text.duration).map_err(field_error("duration"))?;
    if duration == 0 {
        return Err(StepError {
            field: "duration",
            message: format!(
                "a step must last longer than 0; got \"{}\"",
                text.duration.trim()
            ),
        });
    }
    let rate_bps = if text.rate.trim().eq_ignore_ascii_case("unlimited") {
        None
    } else {
        Some(parse_rate(text.rate).map_err(|e| StepError {
            field: "rate",
            message: format!("{e}; a step's rate may also be \"unlimited\""),
        })?)
    };
    let delay = match text.delay {
        Some(delay) => parse_duration(delay).map_err(field_error("delay"))?,
        None => 0,
    };
    let loss = match text.loss {
        Some(loss) => parse_probability(loss).map_err(field_error("loss"))?,
        None => 0.0,
    };
    Ok(ProfileStep {
        duration,
        rate_bps,
        delay,
        loss,
    })
}

/// The profile name when the file does not give one: the file name without extension.
fn default_name(source_name: &str) -> String {
    Path::new(source_name)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| source_name.to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Option<String>,
    repeat: Option<bool>,
    #[serde(default)]
    step: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    duration: Spanned<String>,
    rate: Spanned<String>,
    delay: Option<Spanned<String>>,
    loss: Option<Spanned<String>>,
}

fn text_of(value: &Spanned<String>) -> &str {
    value.get_ref().as_str()
}

/// Parses a profile in TOML format (see the module documentation).
pub fn parse_toml(text: &str, source_name: &str) -> Result<Profile, ParseError> {
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        match e.span() {
            Some(span) => {
                ParseError::at_line(source_name, line_of_offset(text, span.start), message)
            }
            None => ParseError::whole_file(source_name, message),
        }
    })?;
    if raw.step.is_empty() {
        return Err(ParseError::whole_file(
            source_name,
            "the profile has no steps; add at least one [[step]] table with a duration and a rate",
        ));
    }
    let mut steps = Vec::with_capacity(raw.step.len());
    for (index, raw_step) in raw.step.iter().enumerate() {
        let step_text = StepText {
            duration: text_of(&raw_step.duration),
            rate: text_of(&raw_step.rate),
            delay: raw_step.delay.as_ref().map(text_of),
            loss: raw_step.loss.as_ref().map(text_of),
        };
        let step = parse_step(&step_text).map_err(|e| {
            let span_start = match e.field {
                "duration" => raw_step.duration.span().start,
                "rate" => raw_step.rate.span().start,
                "delay" => raw_step.delay.as_ref().map_or(0, |d| d.span().start),
                _ => raw_step.loss.as_ref().map_or(0, |l| l.span().start),
            };
            ParseError::at_line(
                source_name,
                line_of_offset(text, span_start),
                format!("step {}: {}: {}", index + 1, e.field, e.message),
            )
        })?;
        steps.push(step);
    }
    Ok(Profile {
        name: raw.name.unwrap_or_else(|| default_name(source_name)),
        steps,
        repeat: raw.repeat.unwrap_or(true),
    })
}

const CSV_HEADER: [&str; 4] = ["duration", "rate", "delay", "loss"];

/// Parses a profile in CSV format (see the module documentation). CSV profiles repeat and
/// are named after the file.
pub fn parse_csv(text: &str, source_name: &str) -> Result<Profile, ParseError> {
    let mut header_seen = false;
    let mut steps = Vec::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !header_seen {
            if fields != CSV_HEADER {
                return Err(ParseError::at_line(
                    source_name,
                    line_number,
                    format!(
                        "expected the header line \"duration,rate,delay,loss\", got \"{line}\""
                    ),
                ));
            }
            header_seen = true;
            continue;
        }
        let step_number = steps.len() + 1;
        let [duration, rate, delay, loss] = fields[..] else {
            return Err(ParseError::at_line(
                source_name,
                line_number,
                format!(
                    "step {step_number}: expected 4 comma-separated fields \
                     (duration,rate,delay,loss), got {}: \"{line}\"",
                    fields.len()
                ),
            ));
        };
        let step_text = StepText {
            duration,
            rate,
            delay: Some(delay).filter(|d| !d.is_empty()),
            loss: Some(loss).filter(|l| !l.is_empty()),
        };
        let step = parse_step(&step_text).map_err(|e| {
            ParseError::at_line(
                source_name,
                line_number,
                format!("step {step_number}: {}: {}", e.field, e.message),
            )
        })?;
        steps.push(step);
    }
    if !header_seen {
        return Err(ParseError::whole_file(
            source_name,
            "the file is empty; expected the header line \"duration,rate,delay,loss\" \
             followed by one row per step",
        ));
    }
    if steps.is_empty() {
        return Err(ParseError::whole_file(
            source_name,
            "the profile has no steps; add at least one row after the header",
        ));
    }
    Ok(Profile {
        name: default_name(source_name),
        steps,
        repeat: true,
    })
}

/// Loads a profile file, choosing the format by extension (`.toml` or `.csv`).
pub fn load(path: &Path, read: crate::input::ReadText) -> Result<Profile, ParseError> {
    let source_name = path.display().to_string();
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let parse: fn(&str, &str) -> Result<Profile, ParseError> = match extension.as_deref() {
        Some("toml") => parse_toml,
        Some("csv") => parse_csv,
        _ => {
            return Err(ParseError::whole_file(
                &source_name,
                "unknown profile format; expected a file name ending in .toml or .csv",
            ));
        }
    };
    let text = read(path).map_err(|e| {
        ParseError::whole_file(&source_name, format!("cannot read the profile file: {e}"))
    })?;
    parse(&text, &source_name)
}

/// A built-in profile name or a path to a profile file, as a user would give it on the
/// command line. Built-in names win over files of the same name.
pub fn builtin_or_load(
    name_or_path: &str,
    read: crate::input::ReadText,
) -> Result<Profile, ParseError> {
    if let Some(profile) = builtin(name_or_path) {
        return Ok(profile);
    }
    let path = Path::new(name_or_path);
    if name_or_path.eq_ignore_ascii_case("fcc") {
        // Seed 004 used "the FCC profile" but publishes only its range; no documented source of
        // the exact trace was found, so none is shipped rather than an invented one.
        return Err(ParseError::whole_file(
            name_or_path,
            format!(
                "the FCC throughput profile of seed 004 is not shipped: the paper gives only its \
                 range (0.8–1.4 Mbit/s, mean 1.1 Mbit/s), not the trace; give the trace as a .toml \
                 or .csv profile file, or use a built-in profile ({})",
                builtin_names().join(", ")
            ),
        ));
    }
    if path.extension().is_none() {
        return Err(ParseError::whole_file(
            name_or_path,
            format!(
                "not a built-in profile ({}) nor a file name ending in .toml or .csv",
                builtin_names().join(", ")
            ),
        ));
    }
    load(path, read)
}

/// The shipped profiles, as TOML text parsed by the same parser as user files, so the
/// files under `profiles/` double as format examples.
const BUILTINS: [(&str, &str); 7] = [
    (
        "np2b-typical",
        include_str!("../profiles/np2b-typical.toml"),
    ),
    (
        "np2b-large-loss",
        include_str!("../profiles/np2b-large-loss.toml"),
    ),
    (
        "np2b-large-delay",
        include_str!("../profiles/np2b-large-delay.toml"),
    ),
    (
        "np2b-large-delay-loss",
        include_str!("../profiles/np2b-large-delay-loss.toml"),
    ),
    ("wifi", include_str!("../profiles/wifi.toml")),
    ("lte", include_str!("../profiles/lte.toml")),
    ("3g", include_str!("../profiles/3g.toml")),
];

static BUILTIN_NAMES: [&str; 7] = [
    BUILTINS[0].0,
    BUILTINS[1].0,
    BUILTINS[2].0,
    BUILTINS[3].0,
    BUILTINS[4].0,
    BUILTINS[5].0,
    BUILTINS[6].0,
];

/// Names of the built-in profiles.
pub fn builtin_names() -> &'static [&'static str] {
    &BUILTIN_NAMES
}

/// A built-in profile by name (see [`builtin_names`]).
pub fn builtin(name: &str) -> Option<Profile> {
    let (_, text) = BUILTINS
        .iter()
        .find(|(builtin_name, _)| *builtin_name == name)?;
    // The shipped files are checked by the tests, so this only fails if a file is broken.
    parse_toml(text, &format!("{name}.toml")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NANOS_PER_MS, NANOS_PER_SEC};

    fn step(duration_s: u64, rate_bps: Option<u64>, delay_ms: u64, loss: f64) -> ProfileStep {
        ProfileStep {
            duration: duration_s * NANOS_PER_SEC,
            rate_bps,
            delay: delay_ms * NANOS_PER_MS,
            loss,
        }
    }

    fn three_steps(repeat: bool) -> Profile {
        Profile {
            name: "t".into(),
            steps: vec![
                step(10, Some(1_000_000), 10, 0.0),
                step(20, Some(2_000_000), 20, 0.01),
                step(30, None, 30, 0.02),
            ],
            repeat,
        }
    }

    #[test]
    fn step_at_with_repeat_wraps() {
        let profile = three_steps(true);
        let s = NANOS_PER_SEC;
        assert_eq!(profile.step_index_at(0), Some(0));
        assert_eq!(profile.step_index_at(10 * s - 1), Some(0));
        assert_eq!(profile.step_index_at(10 * s), Some(1));
        assert_eq!(profile.step_index_at(30 * s - 1), Some(1));
        assert_eq!(profile.step_index_at(30 * s), Some(2));
        assert_eq!(profile.step_index_at(60 * s - 1), Some(2));
        assert_eq!(profile.step_index_at(60 * s), Some(0));
        assert_eq!(profile.step_index_at(75 * s), Some(1));
        assert_eq!(profile.step_index_at(600 * s + 35 * s), Some(2));
        assert_eq!(profile.step_at(75 * s).rate_bps, Some(2_000_000));
    }

    #[test]
    fn step_at_without_repeat_holds_the_last_step() {
        let profile = three_steps(false);
        let s = NANOS_PER_SEC;
        assert_eq!(profile.step_index_at(5 * s), Some(0));
        assert_eq!(profile.step_index_at(60 * s), Some(2));
        assert_eq!(profile.step_index_at(75 * s), Some(2));
        assert_eq!(profile.step_index_at(u64::MAX), Some(2));
    }

    #[test]
    fn step_at_never_panics_on_degenerate_profiles() {
        let empty = Profile {
            name: "e".into(),
            steps: vec![],
            repeat: true,
        };
        assert_eq!(empty.step_at(123).rate_bps, None);
        assert!(empty.validate().is_err());
        let zero = Profile {
            name: "z".into(),
            steps: vec![step(0, Some(1), 0, 0.0)],
            repeat: true,
        };
        assert_eq!(zero.step_at(123).rate_bps, Some(1));
        assert!(zero.validate().is_err());
    }

    #[test]
    fn means_are_time_weighted() {
        let profile = Profile {
            name: "m".into(),
            steps: vec![
                step(10, Some(1_000_000), 10, 0.0),
                step(30, Some(3_000_000), 50, 0.04),
            ],
            repeat: true,
        };
        assert_eq!(profile.mean_rate_bps(), 2_500_000.0);
        assert_eq!(profile.mean_delay(), 40 * NANOS_PER_MS);
        assert!((profile.mean_loss() - 0.03).abs() < 1e-12);
        assert_eq!(three_steps(true).mean_rate_bps(), f64::INFINITY);
    }

    const EXAMPLE: &str = r#"# quiclab link profile
name = "example"
repeat = false

[[step]]
duration = "30s"
rate = "1.5mbit"
delay = "100ms"
loss = "0.12%"

[[step]]
duration = "500ms"
rate = "unlimited"
"#;

    #[test]
    fn parses_toml() {
        let profile = parse_toml(EXAMPLE, "example.toml").unwrap();
        assert_eq!(profile.name, "example");
        assert!(!profile.repeat);
        assert_eq!(
            profile.steps,
            vec![
                ProfileStep {
                    duration: 30 * NANOS_PER_SEC,
                    rate_bps: Some(1_500_000),
                    delay: 100 * NANOS_PER_MS,
                    loss: 0.0012,
                },
                ProfileStep {
                    duration: 500 * NANOS_PER_MS,
                    rate_bps: None,
                    delay: 0,
                    loss: 0.0,
                },
            ]
        );
    }

    #[test]
    fn toml_defaults_name_and_repeat() {
        let text = "[[step]]\nduration = \"1s\"\nrate = \"1mbit\"\n";
        let profile = parse_toml(text, "/some/dir/commute.toml").unwrap();
        assert_eq!(profile.name, "commute");
        assert!(profile.repeat);
    }

    #[test]
    fn toml_value_errors_carry_file_line_and_step() {
        let text = EXAMPLE.replace("rate = \"unlimited\"", "rate = \"fast\"");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("np.toml:13: step 2: rate: expected a rate such as"),
            "{error}"
        );
        assert!(error.to_string().contains("unlimited"), "{error}");

        let text = EXAMPLE.replace("duration = \"30s\"", "duration = \"0s\"");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("np.toml:6: step 1: duration: a step must last longer than 0"),
            "{error}"
        );

        let text = EXAMPLE.replace("0.12%", "12");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert!(
            error.to_string().starts_with("np.toml:9: step 1: loss: "),
            "{error}"
        );

        let text = EXAMPLE.replace("100ms", "100");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("np.toml:8: step 1: delay: expected a duration"),
            "{error}"
        );
    }

    #[test]
    fn toml_structure_errors_carry_file_and_line() {
        let text = EXAMPLE.replace("loss = \"0.12%\"", "los = \"0.12%\"");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert_eq!(error.line, Some(9), "{error}");
        assert!(error.message.contains("unknown field `los`"), "{error}");

        let text = EXAMPLE.replace("repeat = false", "repeat = \"no\"");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert_eq!(error.line, Some(3), "{error}");

        let text = EXAMPLE.replace("rate = \"unlimited\"\n", "");
        let error = parse_toml(&text, "np.toml").unwrap_err();
        assert!(error.message.contains("missing field `rate`"), "{error}");
        assert!(error.line.is_some(), "{error}");

        let error = parse_toml("name = \"x\"\n[[step]\n", "np.toml").unwrap_err();
        assert_eq!(error.line, Some(2), "{error}");

        let error = parse_toml("name = \"x\"\n", "np.toml").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("np.toml: the profile has no steps"),
            "{error}"
        );
    }

    #[test]
    fn parses_csv() {
        let text = "# commute\nduration, rate, delay, loss\n\n30s,1.5mbit,100ms,0.12%\n 5s , unlimited , , \n";
        let profile = parse_csv(text, "commute.csv").unwrap();
        assert_eq!(profile.name, "commute");
        assert!(profile.repeat);
        assert_eq!(profile.steps.len(), 2);
        assert_eq!(profile.steps[0].rate_bps, Some(1_500_000));
        assert_eq!(profile.steps[0].loss, 0.0012);
        assert_eq!(
            profile.steps[1],
            ProfileStep {
                duration: 5 * NANOS_PER_SEC,
                rate_bps: None,
                delay: 0,
                loss: 0.0
            }
        );
    }

    #[test]
    fn csv_errors_carry_file_and_line() {
        let error = parse_csv("time,rate,delay,loss\n", "c.csv").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("c.csv:1: expected the header line \"duration,rate,delay,loss\""),
            "{error}"
        );
        let error = parse_csv(
            "duration,rate,delay,loss\n1s,1mbit,0ms,0\n1s,1mbit\n",
            "c.csv",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("c.csv:3: step 2: expected 4 comma-separated fields"),
            "{error}"
        );
        let error = parse_csv(
            "duration,rate,delay,loss\n# c\n1s,1mbit,0ms,0\n1s,1mb,0ms,0\n",
            "c.csv",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("c.csv:4: step 2: rate: expected a rate such as"),
            "{error}"
        );
        let error = parse_csv("\n# only comments\n", "c.csv").unwrap_err();
        assert!(
            error.to_string().starts_with("c.csv: the file is empty"),
            "{error}"
        );
        let error = parse_csv("duration,rate,delay,loss\n", "c.csv").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("c.csv: the profile has no steps"),
            "{error}"
        );
    }

    #[test]
    fn load_chooses_the_format_by_extension() {
        let dir = std::env::temp_dir();
        let pid = std::process::id();
        let toml_path = dir.join(format!("quiclab-link-{pid}.toml"));
        let csv_path = dir.join(format!("quiclab-link-{pid}.CSV"));
        std::fs::write(&toml_path, EXAMPLE).unwrap();
        std::fs::write(&csv_path, "duration,rate,delay,loss\n1s,1mbit,5ms,1%\n").unwrap();
        let from_toml = load(&toml_path, &crate::input::fs);
        let from_csv = load(&csv_path, &crate::input::fs);
        std::fs::remove_file(&toml_path).unwrap();
        std::fs::remove_file(&csv_path).unwrap();
        assert_eq!(from_toml.unwrap().name, "example");
        assert_eq!(from_csv.unwrap().steps[0].delay, 5 * NANOS_PER_MS);

        let error = load(Path::new("profile.json"), &crate::input::fs).unwrap_err();
        assert_eq!(
            error.to_string(),
            "profile.json: unknown profile format; expected a file name ending in .toml or .csv"
        );
        let error = load(Path::new("/nonexistent/p.toml"), &crate::input::fs).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("/nonexistent/p.toml: cannot read"),
            "{error}"
        );
    }

    #[test]
    fn builtin_or_load_explains_unknown_names() {
        assert_eq!(
            builtin_or_load("np2b-typical", &crate::input::fs)
                .unwrap()
                .name,
            "np2b-typical"
        );
        let error = builtin_or_load("np2b-typcal", &crate::input::fs).unwrap_err();
        assert!(
            error.to_string().contains("np2b-large-delay-loss"),
            "{error}"
        );
    }

    /// Table 4 of Arisu et al. 2019 ("Game of protocols").
    #[test]
    fn builtins_have_the_table_4_numbers() {
        let rates_mbit = [1.5, 2.0, 3.0, 4.0, 5.0, 4.0, 3.0, 2.0];
        let typical_delay_ms = [100, 88, 75, 50, 38, 50, 75, 88];
        let large_delay_ms = [200, 400, 600, 800, 1300, 800, 600, 400];
        let typical_loss_pct = [0.12, 0.09, 0.06, 0.08, 0.09, 0.08, 0.06, 0.09];
        let large_loss_pct = [0.1, 1.0, 2.0, 5.0, 10.0, 5.0, 2.0, 1.0];
        let expectations = [
            ("np2b-typical", typical_delay_ms, typical_loss_pct),
            ("np2b-large-loss", typical_delay_ms, large_loss_pct),
            ("np2b-large-delay", large_delay_ms, typical_loss_pct),
            ("np2b-large-delay-loss", large_delay_ms, large_loss_pct),
        ];
        assert_eq!(
            &builtin_names()[..4],
            expectations.map(|(name, _, _)| name).as_slice()
        );
        for (name, delays, losses) in expectations {
            let text = BUILTINS.iter().find(|(n, _)| *n == name).unwrap().1;
            // Parse directly too, so a broken file shows its error rather than `None`.
            let parsed = parse_toml(text, &format!("{name}.toml")).unwrap();
            let profile = builtin(name).unwrap();
            assert_eq!(parsed, profile);
            assert_eq!(profile.name, name);
            assert!(profile.repeat, "{name}");
            assert_eq!(profile.steps.len(), 8, "{name}");
            for (i, step) in profile.steps.iter().enumerate() {
                assert_eq!(step.duration, 30 * NANOS_PER_SEC, "{name} step {i}");
                assert_eq!(
                    step.rate_bps,
                    Some((rates_mbit[i] * 1e6) as u64),
                    "{name} step {i}"
                );
                assert_eq!(step.delay, delays[i] * NANOS_PER_MS, "{name} step {i}");
                assert!(
                    (step.loss - losses[i] / 100.0).abs() < 1e-15,
                    "{name} step {i}: {} vs {}%",
                    step.loss,
                    losses[i]
                );
            }
            assert_eq!(profile.cycle_duration(), 240 * NANOS_PER_SEC);
            assert_eq!(profile.mean_rate_bps(), 3_062_500.0, "{name}");
            assert!(profile.validate().is_ok());
        }
        assert!(builtin("np2b").is_none());
    }

    /// Table 1 of Arisu et al. 2019: average bandwidth and RTT of the WiFi, LTE and 3G accesses.
    #[test]
    fn builtins_have_the_table_1_numbers() {
        for (name, mbit, rtt_ms) in [("wifi", 5.9, 69.0), ("lte", 5.4, 128.0), ("3g", 3.1, 234.0)] {
            let p = builtin(name).unwrap();
            assert!(!p.repeat);
            assert_eq!(p.steps.len(), 1);
            assert_eq!(p.steps[0].rate_bps, Some((mbit * 1e6) as u64), "{name}");
            // One direction's delay: the profile applies to both.
            assert_eq!(
                p.steps[0].delay as f64 * 2.0,
                rtt_ms * NANOS_PER_MS as f64,
                "{name}"
            );
            assert_eq!(p.steps[0].loss, 0.0);
        }
        assert_eq!(builtin_names().len(), 7);
    }
}
