//! Scenario files: a TOML description of what to measure.
//!
//! ```toml
//! name = "example"
//! description = "what this scenario asks"
//! repetitions = 10
//! seed = 1
//! order = "interleaved"        # interleaved | random | sequential
//!
//! [workload]
//! kind = "bulk"
//! size = "5MB"
//!
//! [link]                       # defaults for every run
//! rtt = "50ms"
//! queue = "1bdp"
//!
//! [grid]                       # cartesian product; overrides the tables above
//! protocol = ["h1", "h2", "h3"]
//! rate = ["3mbit", "10mbit"]
//! loss = ["0%", "2%"]
//! ```
//!
//! Keys are checked against fixed sets so that a typo (`rtts`) is an error
//! instead of a silently ignored setting that would waste hours of runs.
//! Unit syntax of link values (`"10mbit"`, `"2%"`) is deliberately *not*
//! checked here: the caller owns those parsers, so every value carries its
//! line number ([`Located`]) for the caller to report `FILE:LINE`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use quiclab_model::keys::{self, KEYS, Key, Side, Toml};
pub use quiclab_model::kind::{WorkloadKind, workload_kind_names};

/// Keys accepted in `[link]` (and as `[grid]` axes): the link's rows of the key table.
pub fn link_keys() -> Vec<&'static str> {
    keys::names(Side::Link)
}

/// Keys accepted in `[protocol]` (and as `[grid]` axes).
pub fn protocol_keys() -> Vec<&'static str> {
    keys::names(Side::Protocol)
}

/// `[protocol]` keys that a flows or video run (which names each flow's protocol in its mix)
/// applies to all of its flows or players.
pub fn mix_wide_protocol_keys() -> Vec<&'static str> {
    KEYS.iter().filter(|k| k.mix_wide).map(|k| k.name).collect()
}

/// The separator a key's list of values is joined with (`flows = ["h3", "h1"]` is `h3+h1`;
/// spaces in a mix do not matter and run keys carry none); None: the key takes no list.
fn list_separator(key: &str) -> Option<&'static str> {
    keys::any_kind(key, Side::Workload)
        .and_then(|k| k.list)
        .map(str::trim)
}

/// What a key's row accepts, in words: its TOML types and its form (`a string or an integer
/// (N: ≥ 1)`).
fn expected(row: &Key) -> String {
    let types: Vec<&str> = row
        .toml
        .iter()
        .map(|t| match t {
            Toml::String => "a string",
            Toml::Integer => "an integer",
            Toml::Float => "a number",
            Toml::Bool => "true or false",
        })
        .collect();
    let form = [row.syntax, row.range]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(": ");
    match form.is_empty() {
        true => types.join(" or "),
        false => format!("{} ({form})", types.join(" or ")),
    }
}

/// Names users try for a kind quiclab has under another name: the error says which.
const KIND_ALIASES: &[(&str, WorkloadKind)] = &[
    ("dash", WorkloadKind::Video),
    ("download", WorkloadKind::Bulk),
    ("web", WorkloadKind::Page),
];

/// Protocols, in the order used when none are given.
pub const PROTOCOLS: &[&str] = &["h1", "h2", "h3"];

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "repetitions",
    "seed",
    "order",
    "timeout",
    "retry_flagged",
    "trace",
    "pcap",
    "workload",
    "link",
    "protocol",
    "grid",
    "quick",
    "exclude",
];

/// Upper bound of `retry_flagged`: more attempts than this say the host is unfit, not unlucky.
pub const MAX_RETRY_FLAGGED: u32 = 10;

const ORDERS: &[&str] = &["interleaved", "random", "sequential"];

const TRACE_CHOICES: &[&str] = &["first", "all", "none"];

/// A scalar scenario value. It renders (via `Display`) to the string form a
/// command-line flag takes, e.g. `"10mbit"`, `"2%"`, `"true"`, `"5"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => f.write_str(s),
            Value::Integer(i) => write!(f, "{i}"),
            // `{}` on f64 prints the shortest round-tripping form ("1.3").
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl Value {
    /// Describes the value for error messages, with its TOML type.
    fn describe(&self) -> String {
        match self {
            Value::String(s) => format!("string {s:?}"),
            Value::Integer(i) => format!("integer {i}"),
            Value::Float(x) => format!("float {x}"),
            Value::Bool(b) => format!("boolean {b}"),
        }
    }
}

/// A value together with the 1-based line it came from. `line == 0` means
/// the value was not written in the file (a default filled in by [`parse`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

/// Execution order of the runs of a plan; see [`crate::plan::expand`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Order {
    /// Per setting and repetition, all protocols back to back, so slow drift
    /// of the machine affects every protocol alike.
    #[default]
    Interleaved,
    /// A seeded shuffle of the interleaved order.
    Random,
    /// Grid order, repetitions innermost.
    Sequential,
}

/// Which runs keep time series (congestion window, queue delay).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum TraceRuns {
    /// The first repetition of every setting and protocol: enough for the
    /// report's time-series figures without tracing every run.
    #[default]
    First,
    All,
    None,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// At least 1 (default 1).
    pub repetitions: u32,
    /// Default 0.
    pub seed: u64,
    pub order: Order,
    /// Per-run time limit as written (e.g. `"120s"`); the caller parses the
    /// unit. `None`: the runner derives one from the workload and link.
    pub timeout: Option<Located<Value>>,
    /// `retry_flagged = N`: how many times a run flagged for emulator fidelity is run again (same
    /// seed) until one attempt passes. `None`: the runner's default (`--retry-flagged`, 2).
    pub retry_flagged: Option<u32>,
    pub trace: TraceRuns,
    /// `pcap = "first" | "all" | "none"`: which runs write a pcapng capture with their secrets
    /// (default none: captures are large).
    pub pcap: TraceRuns,
    /// `kind` of `[workload]`.
    pub kind: WorkloadKind,
    /// `[workload]`, including `kind`.
    pub workload: BTreeMap<String, Located<Value>>,
    /// `[link]` defaults for every run.
    pub link: BTreeMap<String, Located<Value>>,
    /// `[protocol]` options (tls, cc, resume, zero_rtt) without `protocol`
    /// itself, which always lives in `grid`.
    pub protocol: BTreeMap<String, Located<Value>>,
    /// Grid axes in file order. After [`parse`] there is always a `protocol`
    /// axis: taken from `[grid]`, else from `[protocol] protocol = ...` (or a
    /// top-level `protocol = ...`), else `h1, h2, h3` (line 0), placed first.
    pub grid: Vec<(String, Vec<Located<Value>>)>,
    /// `[quick]`: the quick form ([`Scenario::quick_form`]).
    pub quick: Option<Quick>,
    /// `exclude = [{ players = "h1", on_switch = "migrate" }, …]`: grid points left out (a run
    /// is left out when its values match every key of one entry). For combinations that cannot
    /// run, such as QUIC migration over TCP.
    pub exclude: Vec<Exclusion>,
}

/// One entry of `exclude`: grid axis → value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exclusion {
    pub line: usize,
    pub values: BTreeMap<String, String>,
}

impl Scenario {
    /// Whether a run with these parameters is left out by `exclude`.
    pub fn excludes(&self, params: &BTreeMap<String, String>) -> bool {
        self.exclude.iter().any(|e| {
            e.values
                .iter()
                .all(|(k, v)| params.get(k).is_some_and(|p| p == v))
        })
    }
}

/// Error from reading or validating a scenario. Display is `FILE:LINE:
/// message` or `FILE: message`.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{file}:{line}: {message}")]
    At {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
}

impl ScenarioError {
    /// The line the error points at, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            ScenarioError::At { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Reads and parses a scenario file; the only I/O in this crate.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let name = path.display().to_string();
    let text = quiclab_outputs::input::read_input(path).map_err(|source| ScenarioError::Io {
        file: name.clone(),
        source,
    })?;
    parse(&text, &name)
}

/// Whether two scenario files' texts describe the same experiment: the same TOML values, whatever
/// their comments, spacing and key order. Runs made from one are runs of the other, so a comment
/// edited since (say, to reword a heading) does not mark kept results as "another version". A text
/// that is not TOML is the same only as itself, byte for byte.
pub fn same_experiment(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<toml::Table>(), b.parse::<toml::Table>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Parses and validates scenario text. `source_name` is used as FILE in
/// error messages.
pub fn parse(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
    let parser = Parser {
        text,
        file: source_name,
    };
    let mut scenario = parser.scenario()?;
    scenario.exclude = parser.exclude(&scenario)?;
    scenario.quick = parser.quick(&scenario)?;
    crate::plan::check_plan_size(&scenario).map_err(|message| ScenarioError::File {
        file: source_name.to_string(),
        message,
    })?;
    Ok(scenario)
}

/// A scenario's `[quick]` table: the quick form `quiclab run --quick` runs (shorter content,
/// fewer repetitions). `repetitions` replaces the scenario's; any other key replaces a grid
/// axis's values (a list) or sets a `[workload]`/`[link]` value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Quick {
    pub repetitions: Option<u32>,
    pub set: Vec<(String, Vec<Located<Value>>)>,
}

impl Scenario {
    /// The quick form (`[quick]` applied; the name gains `-quick` so its results stay apart).
    /// Without a `[quick]` table, an error that says so.
    pub fn quick_form(&self, file: &str) -> Result<Scenario, ScenarioError> {
        let Some(q) = &self.quick else {
            return Err(ScenarioError::File {
                file: file.to_string(),
                message: "no [quick] table: this scenario has no quick form (use --repetitions \
                          to shorten it)"
                    .into(),
            });
        };
        let mut s = self.clone();
        s.name = format!("{}-quick", self.name);
        if let Some(r) = q.repetitions {
            s.repetitions = r;
        }
        for (key, values) in &q.set {
            if let Some((_, axis)) = s.grid.iter_mut().find(|(k, _)| k == key) {
                *axis = values.clone();
                continue;
            }
            let [one] = values.as_slice() else {
                return Err(ScenarioError::At {
                    file: file.to_string(),
                    line: values.first().map_or(0, |v| v.line),
                    message: format!(
                        "key \"{key}\" in [quick]: a list of values replaces a [grid] axis, but \
                         \"{key}\" is not one; give one value"
                    ),
                });
            };
            if link_keys().contains(&key.as_str()) {
                s.link.insert(key.clone(), one.clone());
            } else {
                s.workload.insert(key.clone(), one.clone());
            }
        }
        Ok(s)
    }
}

type Entry<'a, 'i> = (&'a Spanned<DeString<'i>>, &'a Spanned<DeValue<'i>>);

struct Parser<'a> {
    text: &'a str,
    file: &'a str,
}

impl Parser<'_> {
    /// 1-based line of a byte offset.
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        // Count on bytes: '\n' never occurs inside a multi-byte UTF-8 char.
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn at(&self, span: std::ops::Range<usize>, message: String) -> ScenarioError {
        ScenarioError::At {
            file: self.file.to_string(),
            line: self.line_of(span.start),
            message,
        }
    }

    fn whole(&self, message: String) -> ScenarioError {
        ScenarioError::File {
            file: self.file.to_string(),
            message,
        }
    }

    /// Table entries in file order. toml's map is sorted by key, so we sort
    /// by span to report errors top to bottom and keep the grid in file order.
    fn entries<'a, 'i>(table: &'a DeTable<'i>) -> Vec<Entry<'a, 'i>> {
        let mut v: Vec<_> = table.iter().collect();
        v.sort_by_key(|(k, _)| k.span().start);
        v
    }

    fn table<'a, 'i>(
        &self,
        key: &str,
        value: &'a Spanned<DeValue<'i>>,
    ) -> Result<&'a DeTable<'i>, ScenarioError> {
        value.get_ref().as_table().ok_or_else(|| {
            self.at(
                value.span(),
                format!(
                    "key \"{key}\": expected a table, got {}",
                    value.get_ref().type_str()
                ),
            )
        })
    }

    /// Converts a TOML scalar; arrays, tables and datetimes are rejected.
    fn scalar(
        &self,
        section: &str,
        key: &str,
        value: &Spanned<DeValue<'_>>,
    ) -> Result<Located<Value>, ScenarioError> {
        let v = match value.get_ref() {
            // A mix's spaces do not matter (`h3 + h1` is `h3+h1`); run keys carry none.
            DeValue::String(s) if list_separator(key) == Some("+") => {
                Value::String(s.split_whitespace().collect())
            }
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .map(Value::Integer)
                .map_err(|_| {
                    self.at(
                        value.span(),
                        format!("key \"{key}\" in {section}: integer {i} out of range"),
                    )
                })?,
            DeValue::Float(x) => x.as_str().parse().map(Value::Float).map_err(|_| {
                self.at(
                    value.span(),
                    format!("key \"{key}\" in {section}: invalid float {x}"),
                )
            })?,
            DeValue::Boolean(b) => Value::Bool(*b),
            // A flow mix (`["h3", "h1"]`), a player mix, per-flow offsets (`["0s", "10s"]`) and
            // seeks (`["40s:100s", "150s:200s"]`) are lists of strings that make one value.
            DeValue::Array(items) if list_separator(key).is_some() => {
                let mut parts = Vec::new();
                for item in items.iter() {
                    match item.get_ref() {
                        DeValue::String(p) if !p.trim().is_empty() => parts.push(p.to_string()),
                        other => {
                            return Err(self.at(
                                item.span(),
                                format!(
                                    "key \"{key}\" in {section}: expected strings in the list, got {}",
                                    describe_de(other)
                                ),
                            ));
                        }
                    }
                }
                if parts.is_empty() {
                    return Err(self.at(
                        value.span(),
                        format!("key \"{key}\" in {section}: an empty list"),
                    ));
                }
                let sep = list_separator(key).unwrap_or(",");
                Value::String(parts.iter().map(|p| p.trim()).collect::<Vec<_>>().join(sep))
            }
            other => {
                return Err(self.at(
                    value.span(),
                    format!(
                        "key \"{key}\" in {section}: expected a string, number or boolean, got {}",
                        other.type_str()
                    ),
                ));
            }
        };
        Ok(Located {
            value: v,
            line: self.line_of(value.span().start),
        })
    }

    /// A value's TOML type against its key's row of the key table (`quiclab_model::keys`): the
    /// types a scenario may write it in, and what it takes in words; and the values the plan
    /// itself uses (the protocols of the contender axis, the kind). What a value means — a group
    /// size's range, a browser's name, a duration's units — is its row's parser's (`Params::set`,
    /// the one behind the flags): the runner prepares every run through it before the first
    /// starts, with this file's line in every error.
    fn check(&self, section: &str, key: &str, value: &Located<Value>) -> Result<(), ScenarioError> {
        let bad = |expected: &str| ScenarioError::At {
            file: self.file.to_string(),
            line: value.line,
            message: format!(
                "key \"{key}\" in {section}: expected {expected}, got {}",
                value.value.describe()
            ),
        };
        if key == "kind" {
            return self.check_kind(value).map_err(|e| {
                e.unwrap_or_else(|| {
                    bad(&format!(
                        "a workload kind: {}",
                        workload_kind_names().join(", ")
                    ))
                })
            });
        }
        if key == keys::PROTOCOL.name && section != "[link]" {
            let ok = matches!(&value.value, Value::String(s) if PROTOCOLS.contains(&s.as_str()));
            return match ok {
                true => Ok(()),
                false => Err(bad(&format!("one of: {}", PROTOCOLS.join(", ")))),
            };
        }
        let side = match section {
            "[link]" => Some(Side::Link),
            "[protocol]" => Some(Side::Protocol),
            "[workload]" => Some(Side::Workload),
            _ => None,
        };
        let row = match side {
            Some(side) => keys::any_kind(key, side),
            None => KEYS
                .iter()
                .copied()
                .find(|k| k.name == key && k.is_scenario_key()),
        };
        // A key without a row was refused as unknown before its value was read.
        let Some(row) = row else { return Ok(()) };
        let written = match &value.value {
            Value::String(_) => Toml::String,
            Value::Integer(_) => Toml::Integer,
            Value::Float(_) => Toml::Float,
            Value::Bool(_) => Toml::Bool,
        };
        match row.toml.contains(&written) {
            true => Ok(()),
            false => Err(bad(&expected(row))),
        }
    }

    /// `kind`: a kind quiclab has (Err(None): not a kind; Err(Some): a name users try for a kind
    /// quiclab has under another name, said so).
    fn check_kind(&self, value: &Located<Value>) -> Result<(), Option<ScenarioError>> {
        match &value.value {
            Value::String(s) if WorkloadKind::from_name(s).is_some() => Ok(()),
            Value::String(s) => match KIND_ALIASES.iter().find(|(a, _)| a == s) {
                Some((_, kind)) => Err(Some(self.at_line(
                    value.line,
                    format!(
                        "workload kind \"{s}\" is kind = \"{}\" in quiclab; accepted kinds: {}",
                        kind.name(),
                        workload_kind_names().join(", ")
                    ),
                ))),
                None => Err(None),
            },
            _ => Err(None),
        }
    }

    /// The keys `kind` requires (its row of the kinds table): of each group exactly one, in
    /// `[workload]` or as a `[grid]` axis.
    fn check_required(
        &self,
        kind: WorkloadKind,
        workload: &BTreeMap<String, Located<Value>>,
        grid: &[(String, Vec<Located<Value>>)],
        wl_value: &Spanned<DeValue<'_>>,
    ) -> Result<(), ScenarioError> {
        for group in kind.required() {
            let given = |key: &&&Key| {
                workload.contains_key(key.name) || grid.iter().any(|(k, _)| k == key.name)
            };
            let n = group.iter().filter(given).count();
            if n == 1 {
                continue;
            }
            let named = |k: &&&Key| {
                format!(
                    "\"{}\" (e.g. {} = {:?}: {})",
                    k.name, k.name, k.example, k.doc
                )
            };
            let message = match (group.len(), n) {
                (1, _) => format!("missing key {} in [workload] or [grid]", named(&&group[0])),
                (_, 0) => format!(
                    "kind = \"{}\" needs exactly one of {}",
                    kind.name(),
                    group
                        .iter()
                        .map(|k| named(&k))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
                _ => format!(
                    "kind = \"{}\" takes exactly one of {}, not both",
                    kind.name(),
                    group
                        .iter()
                        .map(|k| format!("\"{}\"", k.name))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            };
            return Err(self.at(wl_value.span(), message));
        }
        Ok(())
    }

    fn at_line(&self, line: usize, message: String) -> ScenarioError {
        ScenarioError::At {
            file: self.file.to_string(),
            line,
            message,
        }
    }

    /// A typo gets the names it is near; a key far from every name gets the list.
    fn unknown_key(
        &self,
        key: &Spanned<DeString<'_>>,
        section: &str,
        known: &[&str],
    ) -> ScenarioError {
        let near = near_names(key.get_ref(), known);
        let hint = if near.is_empty() {
            format!("known keys: {}", known.join(", "))
        } else {
            let quoted: Vec<String> = near.iter().map(|n| format!("\"{n}\"")).collect();
            format!(
                "did you mean {}? ({section} takes {} keys; docs/experiments.md lists them)",
                quoted.join(" or "),
                known.len()
            )
        };
        self.at(
            key.span(),
            format!("unknown key \"{}\" in {section}; {hint}", key.get_ref()),
        )
    }

    /// Parses a table of scalars whose keys must be in `known`.
    fn scalar_table(
        &self,
        section: &str,
        table: &DeTable<'_>,
        known: &[&str],
    ) -> Result<BTreeMap<String, Located<Value>>, ScenarioError> {
        let mut out = BTreeMap::new();
        for (k, v) in Self::entries(table) {
            if !known.contains(&k.get_ref().as_ref()) {
                return Err(self.unknown_key(k, section, known));
            }
            // `[protocol] protocol` may be a list; it is handled as a grid axis.
            if section == "[protocol]" && k.get_ref() == keys::PROTOCOL.name {
                continue;
            }
            let value = self.scalar(section, k.get_ref(), v)?;
            self.check(section, k.get_ref(), &value)?;
            out.insert(k.get_ref().to_string(), value);
        }
        Ok(out)
    }

    /// A protocol list given as a string or an array of strings.
    fn protocol_list(
        &self,
        section: &str,
        value: &Spanned<DeValue<'_>>,
    ) -> Result<Vec<Located<Value>>, ScenarioError> {
        let items: Vec<&Spanned<DeValue<'_>>> = match value.get_ref() {
            DeValue::Array(a) => a.iter().collect(),
            _ => vec![value],
        };
        self.axis(section, keys::PROTOCOL.name, value, &items)
    }

    /// Validates the values of one grid axis: non-empty, scalars, no repeats
    /// (a repeat would give two runs the same identity key).
    fn axis(
        &self,
        section: &str,
        key: &str,
        whole: &Spanned<DeValue<'_>>,
        items: &[&Spanned<DeValue<'_>>],
    ) -> Result<Vec<Located<Value>>, ScenarioError> {
        if items.is_empty() {
            return Err(self.at(
                whole.span(),
                format!("key \"{key}\" in {section}: expected a non-empty array"),
            ));
        }
        let mut out: Vec<Located<Value>> = Vec::with_capacity(items.len());
        for item in items {
            let value = self.scalar(section, key, item)?;
            self.check(section, key, &value)?;
            if out
                .iter()
                .any(|o| o.value.to_string() == value.value.to_string())
            {
                return Err(self.at_line(
                    value.line,
                    format!(
                        "key \"{key}\" in {section}: value \"{}\" is listed twice",
                        value.value
                    ),
                ));
            }
            out.push(value);
        }
        Ok(out)
    }

    fn scenario(&self) -> Result<Scenario, ScenarioError> {
        let root = DeTable::parse(self.text).map_err(|e| match e.span() {
            Some(span) => self.at(span, format!("TOML syntax error: {}", e.message())),
            None => self.whole(format!("TOML syntax error: {}", e.message())),
        })?;
        let root = root.get_ref();

        let mut name = None;
        let mut description = String::new();
        let mut repetitions = 1u32;
        let mut seed = 0u64;
        let mut order = Order::default();
        let mut timeout = None;
        let mut retry_flagged = None;
        let mut trace = TraceRuns::default();
        let mut pcap = TraceRuns::None;
        let mut workload = None;
        let mut link = BTreeMap::new();
        let mut protocol = BTreeMap::new();
        let mut protocol_list = None;
        let mut grid_value = None;

        for (k, v) in Self::entries(root) {
            let key: &str = k.get_ref();
            let type_err = |expected: &str| {
                self.at(
                    v.span(),
                    format!(
                        "key \"{key}\": expected {expected}, got {}",
                        describe_de(v.get_ref())
                    ),
                )
            };
            match key {
                "name" | "description" => {
                    let s = v.get_ref().as_str().ok_or_else(|| type_err("a string"))?;
                    if key == "name" {
                        name = Some(s.to_string());
                    } else {
                        description = s.to_string();
                    }
                }
                "repetitions" => {
                    repetitions = v
                        .get_ref()
                        .as_integer()
                        .and_then(|i| u32::from_str_radix(i.as_str(), i.radix()).ok())
                        .filter(|&n| (1..=crate::plan::MAX_REPETITIONS).contains(&n))
                        .ok_or_else(|| {
                            type_err(&format!(
                                "an integer from 1 to {}",
                                crate::plan::MAX_REPETITIONS
                            ))
                        })?;
                }
                "seed" => {
                    seed = v
                        .get_ref()
                        .as_integer()
                        .and_then(|i| u64::from_str_radix(i.as_str(), i.radix()).ok())
                        .ok_or_else(|| type_err("a non-negative integer"))?;
                }
                "order" => {
                    order = match v.get_ref().as_str() {
                        Some("interleaved") => Order::Interleaved,
                        Some("random") => Order::Random,
                        Some("sequential") => Order::Sequential,
                        _ => return Err(type_err(&format!("one of: {}", ORDERS.join(", ")))),
                    };
                }
                "timeout" => match v.get_ref() {
                    DeValue::String(_) => timeout = Some(self.scalar("top level", key, v)?),
                    _ => return Err(type_err("a duration such as \"120s\"")),
                },
                "retry_flagged" => {
                    retry_flagged = Some(
                        v.get_ref()
                            .as_integer()
                            .and_then(|i| u32::from_str_radix(i.as_str(), i.radix()).ok())
                            .filter(|&n| n <= MAX_RETRY_FLAGGED)
                            .ok_or_else(|| {
                                type_err(&format!("an integer from 0 to {MAX_RETRY_FLAGGED}"))
                            })?,
                    );
                }
                "trace" | "pcap" => {
                    let choice = match v.get_ref().as_str() {
                        Some("first") => TraceRuns::First,
                        Some("all") => TraceRuns::All,
                        Some("none") => TraceRuns::None,
                        _ => {
                            return Err(type_err(&format!("one of: {}", TRACE_CHOICES.join(", "))));
                        }
                    };
                    if key == "trace" {
                        trace = choice;
                    } else {
                        pcap = choice;
                    }
                }
                "workload" => workload = Some((self.table(key, v)?, v)),
                "link" => link = self.scalar_table("[link]", self.table(key, v)?, &link_keys())?,
                "protocol" => match v.get_ref() {
                    DeValue::Table(t) => {
                        for (pk, pv) in Self::entries(t) {
                            if pk.get_ref() == keys::PROTOCOL.name {
                                protocol_list = Some(self.protocol_list("[protocol]", pv)?);
                            }
                        }
                        protocol = self.scalar_table("[protocol]", t, &protocol_keys())?;
                    }
                    // A top-level `protocol = "h3"` or `protocol = ["h2", "h3"]`.
                    _ => protocol_list = Some(self.protocol_list("top level", v)?),
                },
                "grid" => grid_value = Some(self.table(key, v)?),
                // Read once the grid is known (see `Parser::exclude`, `Parser::quick`).
                "exclude" => {}
                "quick" => {
                    self.table(key, v)?;
                }
                _ => {
                    return Err(self.at(
                        k.span(),
                        format!(
                            "unknown top-level key \"{key}\"; known keys: {}",
                            TOP_KEYS.join(", ")
                        ),
                    ));
                }
            }
        }

        let name = name.ok_or_else(|| self.whole("missing key \"name\"".into()))?;

        let (wl_table, wl_value) = workload.ok_or_else(|| {
            self.whole(format!(
                "missing [workload] table; accepted kinds: {}",
                workload_kind_names().join(", ")
            ))
        })?;
        // `kind` first: the other keys are only known once the kind is.
        let kind = wl_table.get("kind").ok_or_else(|| {
            self.at(
                wl_value.span(),
                format!(
                    "missing key \"kind\" in [workload]; accepted kinds: {}",
                    workload_kind_names().join(", ")
                ),
            )
        })?;
        let kind_value = self.scalar("[workload]", "kind", kind)?;
        self.check("[workload]", "kind", &kind_value)?;
        let kind_name = kind_value.value.to_string();
        let kind = WorkloadKind::from_name(&kind_name)
            .ok_or_else(|| self.whole(format!("unknown workload kind {kind_name:?}")))?;
        let kind_keys = kind.keys();
        let workload = self.scalar_table("[workload]", wl_table, &kind_keys)?;

        let mut grid: Vec<(String, Vec<Located<Value>>)> = Vec::new();
        if let Some(g) = grid_value {
            let known: Vec<&str> = link_keys()
                .into_iter()
                .chain(kind_keys.iter().copied().filter(|&k| k != "kind"))
                .chain(protocol_keys())
                .collect();
            for (k, v) in Self::entries(g) {
                let key: &str = k.get_ref();
                if key == "kind" {
                    return Err(self.at(
                        k.span(),
                        "key \"kind\" cannot vary in [grid]; write one scenario per workload kind"
                            .into(),
                    ));
                }
                if !known.contains(&key) {
                    return Err(self.unknown_key(k, "[grid]", &known));
                }
                let items: Vec<_> = match v.get_ref() {
                    DeValue::Array(a) => a.iter().collect(),
                    other => {
                        return Err(self.at(
                            v.span(),
                            format!(
                                "key \"{key}\" in [grid]: expected a non-empty array, got {}",
                                other.type_str()
                            ),
                        ));
                    }
                };
                let values = self.axis("[grid]", key, v, &items)?;
                grid.push((key.to_string(), values));
            }
        }

        if kind.names_protocols() {
            // Each flow (player) names its protocol in the mix; [protocol] may only set what
            // applies to all of them (the TLS version, FEC for the h3 ones).
            let ck = kind.contender_key();
            let mix = keys::find(ck, kind).expect("a kind's contender key is one of its keys");
            let example = format!("{ck} = {:?}", mix.example);
            let kind_name = kind.name();
            if let Some(list) = &protocol_list {
                return Err(self.at_line(
                    list[0].line,
                    format!(
                        "kind = \"{kind_name}\": the protocols are named in `{ck}` (e.g. {example}); remove \"{}\"",
                        keys::PROTOCOL.name
                    ),
                ));
            }
            for (k, v) in protocol.iter().chain(
                grid.iter()
                    .filter(|(k, _)| protocol_keys().contains(&k.as_str()))
                    .flat_map(|(k, vs)| vs.first().map(|v| (k, v))),
            ) {
                if !mix_wide_protocol_keys().contains(&k.as_str()) {
                    return Err(self.at_line(
                        v.line,
                        format!(
                            "key \"{k}\" does not apply to kind = \"{kind_name}\": the protocols are named in `{ck}` (e.g. {example}); only {} may be set for all",
                            mix_wide_protocol_keys()
                                .iter()
                                .map(|k| format!("\"{k}\""))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
            if let Some(v) = workload.get(ck)
                && grid.iter().any(|(k, _)| k == ck)
            {
                return Err(self.at_line(
                    v.line,
                    format!("key \"{ck}\" is given both here and in [grid]; keep one"),
                ));
            }
            self.check_required(kind, &workload, &grid, wl_value)?;
            let mut workload = workload;
            if let Some(mix) = workload.remove(ck) {
                grid.insert(0, (ck.to_string(), vec![mix]));
            }
            return Ok(Scenario {
                name,
                description,
                kind,
                repetitions,
                seed,
                order,
                timeout,
                retry_flagged,
                trace,
                pcap,
                workload,
                link,
                protocol,
                grid,
                quick: None,
                exclude: Vec::new(),
            });
        }

        let in_grid = grid.iter().any(|(k, _)| k == keys::PROTOCOL.name);
        match (in_grid, protocol_list) {
            (true, Some(list)) => {
                return Err(self.at_line(
                    list[0].line,
                    format!(
                        "key \"{}\" is given both here and in [grid]; keep one",
                        keys::PROTOCOL.name
                    ),
                ));
            }
            (true, None) => {}
            (false, list) => {
                let list = list.unwrap_or_else(|| {
                    PROTOCOLS
                        .iter()
                        .map(|p| Located {
                            value: Value::String(p.to_string()),
                            line: 0,
                        })
                        .collect()
                });
                grid.insert(0, (keys::PROTOCOL.name.to_string(), list));
            }
        }

        self.check_required(kind, &workload, &grid, wl_value)?;
        Ok(Scenario {
            name,
            description,
            kind,
            repetitions,
            seed,
            order,
            timeout,
            retry_flagged,
            trace,
            pcap,
            workload,
            link,
            protocol,
            grid,
            quick: None,
            exclude: Vec::new(),
        })
    }

    /// `exclude`, checked against the grid: every key an axis, every value one of its values,
    /// and some run left.
    fn exclude(&self, scenario: &Scenario) -> Result<Vec<Exclusion>, ScenarioError> {
        let root = DeTable::parse(self.text).map_err(|e| self.whole(e.message().to_string()))?;
        let Some((_, v)) = Self::entries(root.get_ref())
            .into_iter()
            .find(|(k, _)| k.get_ref() == "exclude")
        else {
            return Ok(Vec::new());
        };
        let shape = "expected a list of tables of grid values, such as [{ players = \"h1\", on_switch = \"migrate\" }]";
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.at(v.span(), format!("key \"exclude\": {shape}")));
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let Some(table) = item.get_ref().as_table() else {
                return Err(self.at(item.span(), format!("key \"exclude\": {shape}")));
            };
            let line = self.line_of(item.span().start);
            let mut values = BTreeMap::new();
            for (k, val) in Self::entries(table) {
                let key: &str = k.get_ref();
                let Some((_, axis)) = scenario.grid.iter().find(|(g, _)| g == key) else {
                    let axes: Vec<&str> = scenario.grid.iter().map(|(g, _)| g.as_str()).collect();
                    return Err(self.at(
                        k.span(),
                        format!(
                            "key \"{key}\" in exclude is not a [grid] axis; axes: {}",
                            axes.join(", ")
                        ),
                    ));
                };
                let value = self.scalar("exclude", key, val)?.value.to_string();
                if !axis.iter().any(|a| a.value.to_string() == value) {
                    let listed: Vec<String> = axis.iter().map(|a| a.value.to_string()).collect();
                    return Err(self.at(
                        val.span(),
                        format!(
                            "exclude: \"{value}\" is not a value of the [grid] axis \"{key}\" ({})",
                            listed.join(", ")
                        ),
                    ));
                }
                values.insert(key.to_string(), value);
            }
            if values.is_empty() {
                return Err(self.at(
                    item.span(),
                    "exclude: an empty entry would leave out every run".into(),
                ));
            }
            out.push(Exclusion { line, values });
        }
        let mut check = scenario.clone();
        check.exclude = out.clone();
        if crate::plan::expand(&check).is_empty() {
            return Err(self.at(v.span(), "exclude leaves out every run of the grid".into()));
        }
        Ok(out)
    }

    /// `[quick]`, checked against the scenario's keys.
    fn quick(&self, scenario: &Scenario) -> Result<Option<Quick>, ScenarioError> {
        let root = DeTable::parse(self.text).map_err(|e| self.whole(e.message().to_string()))?;
        let Some((_, v)) = Self::entries(root.get_ref())
            .into_iter()
            .find(|(k, _)| k.get_ref() == "quick")
        else {
            return Ok(None);
        };
        let table = self.table("quick", v)?;
        let mut known: Vec<&str> = vec!["repetitions"];
        known.extend(scenario.kind.keys().iter().filter(|k| **k != "kind"));
        known.extend(link_keys());
        known.extend(scenario.grid.iter().map(|(k, _)| k.as_str()));
        let mut quick = Quick::default();
        for (k, v) in Self::entries(table) {
            let key: &str = k.get_ref();
            if !known.contains(&key) {
                return Err(self.unknown_key(k, "[quick]", &known));
            }
            if key == "repetitions" {
                quick.repetitions = Some(
                    v.get_ref()
                        .as_integer()
                        .and_then(|i| u32::from_str_radix(i.as_str(), i.radix()).ok())
                        .filter(|&n| (1..=crate::plan::MAX_REPETITIONS).contains(&n))
                        .ok_or_else(|| {
                            self.at(
                                v.span(),
                                format!(
                                    "key \"repetitions\" in [quick]: expected an integer from 1 \
                                     to {}",
                                    crate::plan::MAX_REPETITIONS
                                ),
                            )
                        })?,
                );
                continue;
            }
            // A list replaces a grid axis (a mix or seek list is one value, as in [grid]).
            let is_axis = scenario.grid.iter().any(|(g, _)| g == key);
            let items: Vec<_> = match v.get_ref() {
                DeValue::Array(a) if is_axis => a.iter().collect(),
                _ => vec![v],
            };
            let values = self.axis("[quick]", key, v, &items)?;
            quick.set.push((key.to_string(), values));
        }
        Ok(Some(quick))
    }
}

/// The names of `known` within a few edits of `word` (`-` and `_` alike), nearest first: the
/// suggestions for a typo.
pub fn near_names<'a>(word: &str, known: &[&'a str]) -> Vec<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let w = norm(word);
    let allowed = (w.chars().count() / 3).clamp(1, 3);
    let mut near: Vec<(usize, &str)> = known
        .iter()
        .map(|k| (edit_distance(&w, &norm(k)), *k))
        .filter(|(d, _)| *d <= allowed)
        .collect();
    near.sort();
    near.into_iter().take(3).map(|(_, k)| k).collect()
}

/// Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

fn describe_de(v: &DeValue<'_>) -> String {
    match v {
        DeValue::String(s) => format!("string {s:?}"),
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(x) => format!("float {x}"),
        DeValue::Boolean(b) => format!("boolean {b}"),
        other => other.type_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"name = "example"
description = "what this scenario asks"
repetitions = 10
seed = 1
order = "interleaved"

[workload]
kind = "bulk"
size = "5MB"

[link]
rtt = "50ms"
queue = "1bdp"

[grid]
protocol = ["h1", "h2", "h3"]
rate = ["3mbit", "10mbit"]
loss = ["0%", "2%"]
"#;

    #[test]
    fn a_comment_or_layout_change_is_the_same_experiment_and_a_value_change_is_not() {
        let commented = format!("# a heading reworded\n{}\n# a trailing note\n", EXAMPLE);
        assert!(same_experiment(EXAMPLE, &commented));
        let spaced = EXAMPLE.replace("repetitions = 10", "repetitions    =    10");
        assert!(same_experiment(EXAMPLE, &spaced));
        let changed = EXAMPLE.replace("repetitions = 10", "repetitions = 11");
        assert_ne!(changed, EXAMPLE, "the example names repetitions = 10");
        assert!(!same_experiment(EXAMPLE, &changed));
        // Not TOML: only itself.
        assert!(same_experiment("name = ", "name = "));
        assert!(!same_experiment("name = ", "name =  "));
    }

    fn err(text: &str) -> String {
        parse(text, "s.toml").unwrap_err().to_string()
    }

    #[test]
    fn repetitions_and_plans_are_bounded_before_a_plan_is_built() {
        for bad in ["4294967295", "10001", "4294967296"] {
            let e = err(&with_line(3, &format!("repetitions = {bad}")));
            assert!(
                e.starts_with("s.toml:3: key \"repetitions\"") && e.contains("1 to 10000"),
                "{e}"
            );
        }
        // 3 × 1000 × 2 × 10 000 repetitions: refused naming the product of the axes.
        let losses: Vec<String> = (0..1000)
            .map(|i| format!("\"{}%\"", i as f64 / 100.0))
            .collect();
        let big = with_line(3, "repetitions = 10000").replace(
            "loss = [\"0%\", \"2%\"]",
            &format!("loss = [{}]", losses.join(", ")),
        );
        let e = err(&big);
        assert!(
            e.contains("3 (protocol) × 2 (rate) × 1000 (loss) × 10000 repetitions = 60000000 runs")
                && e.contains("at most 1000000"),
            "{e}"
        );
        let q = format!("{EXAMPLE}\n[quick]\nrepetitions = 99999\n");
        assert!(err(&q).contains("from 1 to 10000"), "{}", err(&q));
    }

    #[test]
    fn a_setting_has_one_name_in_a_scenario() {
        // The old aliases of the link's keys are gone: each is an unknown key, named.
        let alias = EXAMPLE.replace("queue = \"1bdp\"", "queue = \"1bdp\"\naqm = \"codel\"");
        assert!(
            err(&alias).contains("unknown key \"aqm\""),
            "{}",
            err(&alias)
        );
        let gap = EXAMPLE.replace("rtt = \"50ms\"", "rtt = \"50ms\"\ngap = \"1s\"");
        assert!(err(&gap).contains("unknown key \"gap\""), "{}", err(&gap));
        parse(
            &(EXAMPLE.to_string() + "queue-discipline = [\"pie\", \"codel\"]\n"),
            "s.toml",
        )
        .unwrap();
    }

    /// EXAMPLE with one line replaced (1-based), to aim errors at known lines.
    fn with_line(n: usize, line: &str) -> String {
        EXAMPLE
            .lines()
            .enumerate()
            .map(|(i, l)| if i + 1 == n { line } else { l })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn timeout_and_trace_are_read_and_checked() {
        let s = parse(
            &with_line(5, "timeout = \"90s\"\ntrace = \"all\""),
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.timeout.unwrap().value, Value::String("90s".into()));
        assert_eq!(s.trace, TraceRuns::All);
        assert_eq!(s.pcap, TraceRuns::None);
        let s = parse(&with_line(5, "pcap = \"first\""), "s.toml").unwrap();
        assert_eq!(s.pcap, TraceRuns::First);
        let e = err(&with_line(5, "pcap = \"yes\""));
        assert!(e.contains("pcap") && e.contains("first, all, none"), "{e}");
        assert_eq!(parse(EXAMPLE, "s.toml").unwrap().trace, TraceRuns::First);
        let e = err(&with_line(5, "trace = \"some\""));
        assert!(
            e.starts_with("s.toml:5:") && e.contains("first, all, none"),
            "{e}"
        );
        let e = err(&with_line(5, "timeout = 90"));
        assert!(e.starts_with("s.toml:5:") && e.contains("duration"), "{e}");
    }

    #[test]
    fn retry_flagged_is_read_and_bounded() {
        assert_eq!(parse(EXAMPLE, "s.toml").unwrap().retry_flagged, None);
        let s = parse(&with_line(5, "retry_flagged = 0"), "s.toml").unwrap();
        assert_eq!(s.retry_flagged, Some(0));
        let s = parse(&with_line(5, "retry_flagged = 3"), "s.toml").unwrap();
        assert_eq!(s.retry_flagged, Some(3));
        for bad in [
            "retry_flagged = -1",
            "retry_flagged = 11",
            "retry_flagged = \"2\"",
        ] {
            let e = err(&with_line(5, bad));
            assert!(
                e.starts_with("s.toml:5:") && e.contains("an integer from 0 to 10"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn parses_example() {
        let s = parse(EXAMPLE, "s.toml").unwrap();
        assert_eq!(s.name, "example");
        assert_eq!(s.repetitions, 10);
        assert_eq!(s.seed, 1);
        assert_eq!(s.order, Order::Interleaved);
        assert_eq!(s.workload["size"].value.to_string(), "5MB");
        assert_eq!(s.workload["size"].line, 9);
        assert_eq!(s.link["rtt"].line, 12);
        let keys: Vec<&str> = s.grid.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["protocol", "rate", "loss"]);
        assert_eq!(s.grid[2].1[1].value.to_string(), "2%");
        assert_eq!(s.grid[2].1[1].line, 18);
    }

    #[test]
    fn grid_keeps_file_order_not_alphabetical() {
        let text = EXAMPLE.replace(
            "rate = [\"3mbit\", \"10mbit\"]\nloss = [\"0%\", \"2%\"]",
            "loss = [\"0%\", \"2%\"]\nrate = [\"3mbit\", \"10mbit\"]",
        );
        let s = parse(&text, "s.toml").unwrap();
        let keys: Vec<&str> = s.grid.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["protocol", "loss", "rate"]);
    }

    #[test]
    fn values_render_as_flags() {
        assert_eq!(Value::String("10mbit".into()).to_string(), "10mbit");
        assert_eq!(Value::Integer(5).to_string(), "5");
        assert_eq!(Value::Float(1.3).to_string(), "1.3");
        assert_eq!(Value::Bool(true).to_string(), "true");
    }

    #[test]
    fn default_protocols_when_absent() {
        let text = EXAMPLE.replace("protocol = [\"h1\", \"h2\", \"h3\"]\n", "");
        let s = parse(&text, "s.toml").unwrap();
        assert_eq!(s.grid[0].0, "protocol");
        let p: Vec<String> = s.grid[0].1.iter().map(|v| v.value.to_string()).collect();
        assert_eq!(p, ["h1", "h2", "h3"]);
        assert_eq!(s.grid[0].1[0].line, 0);
    }

    #[test]
    fn protocol_table() {
        let text = EXAMPLE.replace("protocol = [\"h1\", \"h2\", \"h3\"]\n", "")
            + "\n[protocol]\nprotocol = \"h3\"\ntls = 1.3\ncc = \"bbr\"\nresume = true\nzero_rtt = false\n";
        let s = parse(&text, "s.toml").unwrap();
        assert_eq!(s.grid[0].0, "protocol");
        assert_eq!(s.grid[0].1.len(), 1);
        assert_eq!(s.grid[0].1[0].value.to_string(), "h3");
        assert!(!s.protocol.contains_key("protocol"));
        assert_eq!(s.protocol["tls"].value.to_string(), "1.3");
        assert_eq!(s.protocol["resume"].value, Value::Bool(true));
    }

    #[test]
    fn protocol_twice_is_an_error() {
        let text = EXAMPLE.to_string() + "\n[protocol]\nprotocol = \"h3\"\n";
        assert!(
            err(&text).contains("both here and in [grid]"),
            "{}",
            err(&text)
        );
    }

    #[test]
    fn unknown_link_key_names_file_line_and_known_keys() {
        let e = err(&with_line(12, "rtts = \"50ms\""));
        assert_eq!(
            e,
            format!(
                "s.toml:12: unknown key \"rtts\" in [link]; did you mean \"rtt\"? ([link] takes \
                 {} keys; docs/experiments.md lists them)",
                link_keys().len()
            )
        );
        assert_eq!(near_names("ratee", &["rate", "up-rate", "rtt"]), ["rate"]);
        assert_eq!(near_names("seek-check", &["seek_check"]), ["seek_check"]);
        assert_eq!(near_names("qdisc", &["queue", "rate"]), Vec::<&str>::new());
        // Far from every name: the list.
        let e = err(&with_line(12, "bottleneck = \"50ms\""));
        assert_eq!(
            e,
            "s.toml:12: unknown key \"bottleneck\" in [link]; known keys: rate, up-rate, down-rate, \
             trace, up-trace, down-trace, profile, up-profile, down-profile, delay, rtt, up-delay, \
             down-delay, loss, up-loss, down-loss, queue, up-queue, down-queue, queue-discipline, \
             up-queue-discipline, down-queue-discipline, ecn, jitter, reorder, reorder-delay, \
             tcp-slow-start-after-idle, tcp-rack, tcp-rmem, tcp-wmem, client-cpu, server-cpu, \
             switch, switch-gap, seed"
        );
    }

    #[test]
    fn wrong_types_name_line_key_and_accepted_values() {
        let e = err(&with_line(3, "repetitions = \"ten\""));
        assert!(e.starts_with("s.toml:3: key \"repetitions\""), "{e}");
        assert!(e.contains("\"ten\""), "{e}");

        let e = err(&with_line(3, "repetitions = 0"));
        assert!(e.starts_with("s.toml:3:"), "{e}");

        let e = err(&with_line(5, "order = \"shuffled\""));
        assert!(e.starts_with("s.toml:5: key \"order\""), "{e}");
        assert!(e.contains("interleaved, random, sequential"), "{e}");

        let e = err(&with_line(16, "protocol = [\"h1\", \"h4\"]"));
        assert!(
            e.starts_with("s.toml:16: key \"protocol\" in [grid]"),
            "{e}"
        );
        assert!(e.contains("h1, h2, h3"), "{e}");

        let e = err(&with_line(4, "seed = -1"));
        assert!(e.starts_with("s.toml:4: key \"seed\""), "{e}");
    }

    #[test]
    fn workload_kinds() {
        let e = err(&with_line(8, "kind = \"dash\""));
        assert!(e.starts_with("s.toml:8:"), "{e}");
        assert!(
            e.contains("\"dash\" is kind = \"video\" in quiclab; accepted kinds: bulk, page"),
            "{e}"
        );
        // A page workload takes page keys, not bulk's, and needs a page.
        let e = err(&with_line(8, "kind = \"page\""));
        assert!(e.starts_with("s.toml:9: unknown key \"size\""), "{e}");
        let e = err(&with_line(
            8,
            "kind = \"page\"\npage = \"carlucci-small\"\nbrowser = 3",
        ));
        assert!(
            e.contains("key \"browser\"") && e.contains("builtin|chromium"),
            "{e}"
        );
        let page = EXAMPLE
            .replace(
                "kind = \"bulk\"\nsize = \"5MB\"",
                "kind = \"page\"\nmax_streams = 6",
            )
            .replace(
                "loss = [",
                "page = [\"carlucci-small\", \"megyesi-5-large\"]\nloss = [",
            );
        let s = parse(&page, "s.toml").unwrap();
        assert!(s.grid.iter().any(|(k, v)| k == "page" && v.len() == 2));
        let e = err(&EXAMPLE.replace("kind = \"bulk\"\nsize = \"5MB\"", "kind = \"page\""));
        assert!(e.contains("missing key \"page\""), "{e}");
        let e = err(&with_line(8, "kind = \"dash\""));
        assert!(
            e.contains("kind = \"video\"") && e.contains("flows, video"),
            "{e}"
        );
        let e = err(&with_line(8, "kind = \"teleport\""));
        assert!(
            e.contains("a workload kind: bulk, page, flows, video"),
            "{e}"
        );
        let e = err(&with_line(9, "sizes = \"5MB\""));
        assert!(
            e.starts_with("s.toml:9: unknown key \"sizes\" in [workload]"),
            "{e}"
        );
    }

    #[test]
    fn grid_errors() {
        let e = err(&with_line(17, "rate = []"));
        assert!(
            e.starts_with("s.toml:17:") && e.contains("non-empty array"),
            "{e}"
        );
        let e = err(&with_line(17, "rate = \"3mbit\""));
        assert!(
            e.starts_with("s.toml:17:") && e.contains("non-empty array"),
            "{e}"
        );
        let e = err(&with_line(17, "rates = [\"3mbit\"]"));
        assert!(
            e.starts_with("s.toml:17: unknown key \"rates\" in [grid]"),
            "{e}"
        );
        let e = err(&with_line(17, "kind = [\"bulk\"]"));
        assert!(e.starts_with("s.toml:17:"), "{e}");
        let e = err(&with_line(17, "rate = [\"3mbit\", \"3mbit\"]"));
        assert!(e.contains("listed twice"), "{e}");
        // Grid may vary the size, a protocol option or a link key.
        let ok = with_line(17, "size = [\"1MB\", \"5MB\"]\nresume = [true, false]");
        parse(&ok, "s.toml").unwrap();
    }

    #[test]
    fn unknown_top_level_and_syntax_errors() {
        let e = err(&with_line(2, "descr = \"x\""));
        assert!(
            e.starts_with("s.toml:2: unknown top-level key \"descr\""),
            "{e}"
        );
        let e = err(&with_line(4, "seed = = 1"));
        assert!(e.starts_with("s.toml:4: TOML syntax error"), "{e}");
        let e = err(&with_line(1, ""));
        assert_eq!(e, "s.toml: missing key \"name\"");
    }

    #[test]
    fn load_reports_io_errors() {
        let e = load(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x.toml: "), "{e}");
        assert_eq!(e.line(), None);
    }

    const FLOWS: &str = r#"name = "f"
[workload]
kind = "flows"
duration = "30s"
[link]
rate = "5mbit"
[grid]
flows = ["h3 + h1", ["h3", "h1", "h1"], "h1"]
queue = ["13kB", "60kB"]
"#;

    #[test]
    fn flow_mixes_are_the_contenders_of_a_flows_scenario() {
        let s = parse(FLOWS, "f.toml").unwrap();
        assert_eq!(s.kind, WorkloadKind::Flows);
        // No protocol axis; the mix axis keeps file order, spaces removed, lists joined by "+".
        let keys: Vec<&str> = s.grid.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["flows", "queue"]);
        let mixes: Vec<String> = s.grid[0].1.iter().map(|v| v.value.to_string()).collect();
        assert_eq!(mixes, ["h3+h1", "h3+h1+h1", "h1"]);
        let runs = crate::plan::expand(&s);
        assert_eq!(runs.len(), 6);
        assert_eq!(runs[0].key, "flows=h3+h1;queue=13kB;rep=1");
        assert_eq!(runs[1].contender, "h3+h1+h1");
        assert_eq!(runs[1].params["flows"], "h3+h1+h1");
        // The mixes of one setting and repetition meet the same seed.
        assert_eq!(runs[0].seed, runs[2].seed);

        // A mix in [workload] is one value: one contender.
        let one = FLOWS
            .replace(
                "duration = \"30s\"",
                "duration = \"30s\"\nflows = [\"h3\", \"h1\"]",
            )
            .replace(
                "flows = [\"h3 + h1\", [\"h3\", \"h1\", \"h1\"], \"h1\"]\n",
                "",
            );
        let s = parse(&one, "f.toml").unwrap();
        assert_eq!(s.grid[0].0, "flows");
        assert_eq!(s.grid[0].1.len(), 1);
        assert_eq!(s.grid[0].1[0].value.to_string(), "h3+h1");
    }

    const SWITCH: &str = r#"name = "sw"
exclude = [{ players = "h1", on_switch = "migrate" }]
[workload]
kind = "video"
live = true
[link]
switch = "arisu2019-lte"
[grid]
players = ["h1", "h3"]
on_switch = ["reconnect", "migrate"]
abr = ["basic", "sara"]
"#;

    #[test]
    fn exclude_leaves_out_grid_points_that_cannot_run() {
        let s = parse(SWITCH, "s.toml").unwrap();
        assert_eq!(s.exclude.len(), 1);
        assert_eq!(s.exclude[0].line, 2);
        let runs = crate::plan::expand(&s);
        // 2 players × 2 behaviours × 2 ABRs = 8, less h1 + migrate (2).
        assert_eq!(runs.len(), 6);
        assert!(
            !runs
                .iter()
                .any(|r| r.params["players"] == "h1" && r.params["on_switch"] == "migrate")
        );
        assert!(runs.iter().enumerate().all(|(i, r)| r.index == i));
        assert_eq!(
            runs.iter()
                .filter(|r| r.params["on_switch"] == "migrate")
                .count(),
            2
        );
        // A key that is not an axis, a value not on the axis, an entry that is not a table, and
        // an exclusion of everything are refused, naming the line.
        let e = err(&SWITCH.replace("on_switch = \"migrate\" }", "buffer = \"8s\" }"));
        assert!(
            e.starts_with("s.toml:2:") && e.contains("not a [grid] axis"),
            "{e}"
        );
        let e = err(&SWITCH.replace("on_switch = \"migrate\" }", "on_switch = \"teleport\" }"));
        assert!(
            e.contains("not a value of the [grid] axis \"on_switch\""),
            "{e}"
        );
        let e = err(&SWITCH.replace(
            "exclude = [{ players = \"h1\", on_switch = \"migrate\" }]",
            "exclude = [\"h1\"]",
        ));
        assert!(
            e.starts_with("s.toml:2:") && e.contains("list of tables"),
            "{e}"
        );
        let e = err(&SWITCH.replace(
            "exclude = [{ players = \"h1\", on_switch = \"migrate\" }]",
            "exclude = [{ players = \"h1\" }, { players = \"h3\" }]",
        ));
        assert!(e.contains("leaves out every run"), "{e}");
        // on_switch's values are the workload parser's (the runner's preparation tests them);
        // here only its type.
        let e = err(&SWITCH.replace("\"reconnect\", \"migrate\"]", "\"reconnect\", 3]"));
        assert!(e.contains("reconnect, reconnect-0rtt, migrate"), "{e}");
    }

    #[test]
    fn flows_scenarios_refuse_protocol_keys_and_want_one_amount() {
        let e = err(&FLOWS.replace("[grid]", "[protocol]\ncc = \"bbr\"\n[grid]"));
        assert!(
            e.contains("\"cc\" does not apply to kind = \"flows\""),
            "{e}"
        );
        let e = err(&FLOWS.replace("name = \"f\"", "name = \"f\"\nprotocol = \"h3\""));
        assert!(e.contains("the protocols are named in `flows`"), "{e}");
        let e = err(&FLOWS.replace("duration = \"30s\"", "duration = \"30s\"\nsize = \"1MB\""));
        assert!(e.contains("exactly one of \"duration\""), "{e}");
        let e = err(&FLOWS.replace("duration = \"30s\"\n", ""));
        assert!(e.contains("exactly one of \"duration\""), "{e}");
        let e = err(&FLOWS.replace("[\"h3\", \"h1\", \"h1\"]", "[\"h3\", 5]"));
        assert!(
            e.starts_with("s.toml:8:") && e.contains("expected strings"),
            "{e}"
        );
        let e = err(&FLOWS.replace("\"h1\"]\nqueue", "[]]\nqueue"));
        assert!(e.contains("an empty list"), "{e}");
        let e = err(&FLOWS.replace(
            "flows = [\"h3 + h1\", [\"h3\", \"h1\", \"h1\"], \"h1\"]\n",
            "",
        ));
        assert!(e.contains("missing key \"flows\""), "{e}");
        // TLS may be set for all flows.
        parse(
            &FLOWS.replace("[grid]", "[protocol]\ntls = \"1.3\"\n[grid]"),
            "f.toml",
        )
        .unwrap();
    }

    const VIDEO: &str = r#"name = "v"
repetitions = 3
[workload]
kind = "video"
content = "bbb"
seek = ["40s:100s", "150s:200s"]
[grid]
profile = ["wifi", "lte"]
abr = ["basic", "bba2"]
players = ["h1", "h1 + h3", ["h3", "h3"]]
[quick]
repetitions = 1
duration = "120s"
seek = "30s:60s"
abr = ["basic"]
"#;

    #[test]
    fn video_scenarios_vary_player_mixes_and_have_a_quick_form() {
        let s = parse(VIDEO, "v.toml").unwrap();
        assert_eq!(s.kind, WorkloadKind::Video);
        let runs = crate::expand(&s);
        assert_eq!(runs.len(), 2 * 2 * 3 * 3);
        assert!(runs.iter().any(|r| r.params["players"] == "h3+h3"));
        assert_eq!(s.workload["seek"].value.to_string(), "40s:100s,150s:200s");
        let q = s.quick_form("v.toml").unwrap();
        assert_eq!(q.name, "v-quick");
        assert_eq!(q.repetitions, 1);
        assert_eq!(q.workload["duration"].value.to_string(), "120s");
        assert_eq!(q.workload["seek"].value.to_string(), "30s:60s");
        assert_eq!(crate::expand(&q).len(), 2 * 3);
        // Without [quick], --quick says so.
        let plain = parse(&VIDEO[..VIDEO.find("[quick]").unwrap()], "v.toml").unwrap();
        let e = plain.quick_form("v.toml").unwrap_err().to_string();
        assert!(e.contains("no [quick] table"), "{e}");
    }

    #[test]
    fn bad_video_scenarios_name_the_line_and_key() {
        let err = |text: &str| parse(text, "v.toml").unwrap_err().to_string();
        let e = err(&VIDEO.replace("abr = [\"basic\"]", "speed = [\"fast\"]"));
        assert!(e.contains("unknown key \"speed\" in [quick]"), "{e}");
        let e = err(&VIDEO.replace("repetitions = 1", "repetitions = 0"));
        assert!(
            e.starts_with("v.toml:12:") && e.contains("integer from 1 to 10000"),
            "{e}"
        );
        let e = err(&VIDEO.replace("name = \"v\"", "name = \"v\"\nprotocol = \"h3\""));
        assert!(e.contains("the protocols are named in `players`"), "{e}");
        // The types are the key table's: a count may be written "4" (its parser reads it), but
        // not true.
        let ok = VIDEO.replace(
            "content = \"bbb\"",
            "content = \"bbb\"\nconnections = \"4\"",
        );
        parse(&ok, "v.toml").unwrap();
        let e = err(&VIDEO.replace("content = \"bbb\"", "content = \"bbb\"\nconnections = true"));
        assert!(
            e.starts_with("v.toml:6:") && e.contains("expected an integer or a string"),
            "{e}"
        );
        let e = err(&VIDEO.replace("content = \"bbb\"", "content = \"bbb\"\nlive = \"yes\""));
        assert!(e.contains("true or false"), "{e}");
        let e = err(&VIDEO.replace("players = [\"h1\", \"h1 + h3\", [\"h3\", \"h3\"]]\n", ""));
        assert!(e.contains("missing key \"players\""), "{e}");
        let e = err(&VIDEO.replace("[quick]", "[quick]\nprofile = \"wifi\"\ncolor = 1"));
        assert!(e.contains("unknown key \"color\""), "{e}");
    }
}
