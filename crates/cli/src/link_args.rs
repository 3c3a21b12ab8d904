//! Flags derived from quiclab-model's key table: one spelling per setting, the parser, help line
//! and value form of its row. A command flattens the groups it takes ([`LinkFlags`],
//! [`HostFlags`], [`SwitchFlags`], [`KindFlags`]); every value goes to [`Params::set`] under its
//! key, so `--size 5MB` and `size = "5MB"` are one parameter with one meaning.

use std::marker::PhantomData;

use anyhow::Result;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use quiclab_lab::LinkSpec;

use quiclab_model::WorkloadKind;
use quiclab_model::keys::{self, KEYS, Key, Side};
use quiclab_model::params::Params;

/// A group of the table's rows, as one help section.
pub trait Rows {
    const HEADING: &'static str;
    fn rows() -> Vec<&'static Key>;
}

fn is_switch_row(k: &Key) -> bool {
    k.name == keys::SWITCH.name || k.name == keys::SWITCH_GAP.name
}

macro_rules! rows {
    ($($(#[$doc:meta])* $t:ident, $heading:literal, $pick:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $t;
        impl Rows for $t {
            const HEADING: &'static str = $heading;
            fn rows() -> Vec<&'static Key> {
                let pick: fn(&Key) -> bool = $pick;
                KEYS.iter().copied().filter(|k| pick(k)).collect()
            }
        }
    )*};
}

rows! {
    /// The link's keys, less the network switches.
    Link, "Link options (both directions unless prefixed up-/down-)",
        |k| k.side == Side::Link && !is_switch_row(k);
    /// How this host runs the emulator (flags only).
    Host, "Emulator on this host (flags only, never scenario keys)", |k| k.side == Side::Host;
    /// Network switches (the commands whose clients answer them).
    Switch, "Network switches", is_switch_row;
}

/// A workload kind's own keys, its protocol keys and the run's.
pub trait Kind {
    const KIND: WorkloadKind;
}
macro_rules! kind_rows {
    ($($t:ident = $k:ident),*) => {$(
        #[derive(Debug, Clone)]
        pub struct $t;
        impl Kind for $t {
            const KIND: WorkloadKind = WorkloadKind::$k;
        }
    )*};
}
kind_rows!(Bulk = Bulk, Page = Page, Flows = Flows, Video = Video);

#[derive(Debug, Clone)]
pub struct Own<K>(PhantomData<K>);
impl<K: Kind> Rows for Own<K> {
    const HEADING: &'static str = "Workload, protocol and run";
    fn rows() -> Vec<&'static Key> {
        // The network switches only where the client answers them (no --switch to refuse).
        keys::of_kind(K::KIND)
            .filter(|k| match k.side {
                Side::Protocol | Side::Run | Side::Workload => true,
                _ => is_switch_row(k) && K::KIND.answers_switches(),
            })
            .collect()
    }
}

/// The values given for a group's rows, in row order.
#[derive(Debug, Clone)]
pub struct Flags<R> {
    pub given: Vec<(&'static Key, String)>,
    rows: PhantomData<R>,
}

pub type LinkFlags = Flags<Link>;
pub type HostFlags = Flags<Host>;
pub type SwitchFlags = Flags<Switch>;
pub type KindFlags<K> = Flags<Own<K>>;

impl<R: Rows> Args for Flags<R> {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd.next_help_heading(R::HEADING);
        for k in R::rows() {
            let mut help = k.doc.to_string();
            if !k.default.is_empty() && k.switch.is_none() {
                help.push_str(&format!(" [default: {}]", k.default));
            }
            let arg = Arg::new(k.flag()).long(k.flag()).help(help);
            cmd = cmd.arg(match (k.switch, k.list) {
                (Some(_), _) => arg.action(ArgAction::SetTrue),
                (None, Some(_)) => arg.action(ArgAction::Append).value_name(k.syntax),
                (None, None) => arg.value_name(k.syntax),
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<R: Rows> FromArgMatches for Flags<R> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for k in R::rows() {
            match k.switch {
                Some(v) if m.get_flag(&k.flag()) => given.push((k, v.to_string())),
                Some(_) => {}
                None => {
                    if let Some(values) = m.get_many::<String>(&k.flag()) {
                        let values: Vec<&str> = values.map(String::as_str).collect();
                        given.push((k, values.join(k.list.unwrap_or(""))));
                    }
                }
            }
        }
        Ok(Flags {
            given,
            rows: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// A group of given flags.
pub trait Given {
    fn given(&self) -> &[(&'static Key, String)];
}

impl<R> Given for Flags<R> {
    fn given(&self) -> &[(&'static Key, String)] {
        &self.given
    }
}

/// The parameters of a run of `kind` from the flags of `groups`; an error names the flag.
pub fn params(kind: WorkloadKind, groups: &[&dyn Given]) -> Result<Params> {
    Params::from_flags(kind, groups.iter().flat_map(|g| g.given())).map_err(anyhow::Error::msg)
}

/// The link the parameters describe, with what it allows but does less than it may seem
/// (`LinkOptions::notes`) printed.
pub fn link_spec(params: &Params) -> Result<LinkSpec> {
    let spec = quiclab_lab::link_spec::of(&params.link).map_err(anyhow::Error::msg)?;
    for note in params.link.notes(&spec) {
        eprintln!("quiclab: note: {note}");
    }
    Ok(spec)
}
