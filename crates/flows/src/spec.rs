//! Flow specs: `PROTO[:CC]`, where PROTO is h1 (one TLS/TCP connection), h2 or h3, and CC the
//! congestion controller of that transport (h1/h2: cubic, reno, bbr; h3: cubic, newreno, bbr,
//! gquic-cubic). A mix is one or more flows.

use quiclab_proto::options::{Protocol, StackOptions};
use serde::Serialize;

/// Why a flow spec or mix is not accepted; the text says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

/// The forms a flow spec takes, for error messages.
pub const FLOW_FORMS: &str = "PROTO or PROTO:CC with PROTO h1, h2 or h3 and CC cubic, reno or bbr \
                              for h1/h2, cubic, newreno, bbr or gquic-cubic for h3 (e.g. h3:gquic-cubic, h1:cubic)";

/// One flow of a mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    pub proto: Protocol,
    /// The congestion controller of the flow's transport (cubic when not given).
    pub cc: &'static str,
    /// Whether the spec named the controller (it then appears in labels).
    pub cc_given: bool,
}

impl FlowSpec {
    /// Parses `h3`, `h3:gquic-cubic`, `h1:cubic`.
    pub fn parse(s: &str) -> Result<FlowSpec, SpecError> {
        let s = s.trim();
        let (p, cc) = match s.split_once(':') {
            Some((p, cc)) => (p, Some(cc)),
            None => (s, None),
        };
        let proto: Protocol = p.parse().map_err(|_| {
            SpecError(format!(
                "{s:?}: unknown protocol {p:?}; expected {FLOW_FORMS}"
            ))
        })?;
        let stack = match cc {
            Some(cc) => StackOptions::default()
                .with_cc(proto, cc)
                .map_err(|e| SpecError(format!("{s:?}: {e}")))?,
            None => StackOptions::default(),
        };
        Ok(FlowSpec {
            proto,
            cc: stack.cc_name(proto),
            cc_given: cc.is_some(),
        })
    }

    /// The stacks' options of this flow.
    pub fn stack(&self) -> StackOptions {
        StackOptions::default()
            .with_cc(self.proto, self.cc)
            .unwrap_or_default()
    }

    /// `h3` or `h3:gquic-cubic` (the controller only when the spec named it).
    pub fn label(&self) -> String {
        if self.cc_given {
            format!("{}:{}", self.proto, self.cc)
        } else {
            self.proto.to_string()
        }
    }
}

/// Flows sharing one bottleneck, in the order they were given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowMix {
    pub flows: Vec<FlowSpec>,
}

impl FlowMix {
    /// Parses a list of flow specs (`["h3:gquic-cubic", "h1:cubic"]`); an empty list is an error.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<FlowMix, SpecError> {
        if specs.is_empty() {
            return Err(SpecError(format!(
                "an empty flow mix: give at least one flow ({FLOW_FORMS})"
            )));
        }
        let flows = specs
            .iter()
            .map(|s| FlowSpec::parse(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FlowMix { flows })
    }

    /// Parses `h3:gquic-cubic + h1:cubic` (flows joined by `+`).
    pub fn parse_joined(s: &str) -> Result<FlowMix, SpecError> {
        FlowMix::parse(&quiclab_proto::mix::split_joined(s).map_err(SpecError)?)
    }

    /// The contender label: runs of equal flows as `LABELxN`, joined by `+` (`h3+h1`,
    /// `h3x2+h1x2`, `h3:gquic-cubic+h1`).
    pub fn label(&self) -> String {
        quiclab_proto::mix::label(self.flows.iter().map(|m| m.label()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_parse_with_and_without_a_controller() {
        let f = FlowSpec::parse("h3:gquic-cubic").unwrap();
        assert_eq!(
            (f.proto, f.cc, f.label().as_str()),
            (Protocol::H3, "gquic-cubic", "h3:gquic-cubic")
        );
        assert_eq!(f.stack().quic_cc.as_str(), "gquic-cubic");
        let f = FlowSpec::parse(" h1 ").unwrap();
        assert_eq!(
            (f.proto, f.cc, f.label().as_str()),
            (Protocol::H1, "cubic", "h1")
        );
        assert_eq!(
            FlowSpec::parse("h1:bbr")
                .unwrap()
                .stack()
                .tcp_cc
                .kernel_name(),
            "bbr"
        );
    }

    #[test]
    fn bad_specs_say_what_is_allowed() {
        let e = FlowSpec::parse("h4").unwrap_err().0;
        assert!(e.contains("\"h4\"") && e.contains("h1, h2 or h3"), "{e}");
        let e = FlowSpec::parse("h3:reno").unwrap_err().0;
        assert!(
            e.contains("for h3: cubic, newreno, bbr, gquic-cubic"),
            "{e}"
        );
        let e = FlowSpec::parse("h1:gquic-cubic").unwrap_err().0;
        assert!(e.contains("for h1/h2"), "{e}");
        let e = FlowMix::parse::<&str>(&[]).unwrap_err().0;
        assert!(e.contains("empty"), "{e}");
        assert!(FlowMix::parse_joined(" + ").is_err());
    }

    #[test]
    fn mixes_are_labelled_by_runs_of_equal_flows() {
        let l = |s: &str| FlowMix::parse_joined(s).unwrap().label();
        assert_eq!(l("h3 + h1"), "h3+h1");
        assert_eq!(l("h3+h3+h1+h1"), "h3x2+h1x2");
        assert_eq!(l("h3:gquic-cubic + h1:cubic"), "h3:gquic-cubic+h1:cubic");
        assert_eq!(l("h3+h1+h1+h1"), "h3+h1x3");
    }
}
