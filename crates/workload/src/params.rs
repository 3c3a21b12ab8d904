//! The run a workload's parameters ask for: quiclab-model's pure build (`run::build::build`, every
//! rule that spans keys checked there) and, before any lab starts, what only this machine can
//! say — whether the programs the run needs are installed, whether a page directory holds its
//! objects. A refused combination names the key to change.
//!
//! Adding a key: its row in `quiclab_model::keys` and its use where the run is built. The test
//! `every_key_reaches_the_run` fails for a row whose value changes no run.

use std::path::Path;

use quiclab_lab::LinkSpec;
use quiclab_model::implementation::{Client, Server};
pub use quiclab_model::params::{ParamError, Params, fec_group, refuse, size};
pub use quiclab_model::run::build::{DEFAULT_BULK_SIZE, Run};

use crate::WorkloadSpec;
use crate::child::Browser;
use crate::page::PageSourceFiles;

/// The run `p` asks for over `link`, with every rule that spans keys checked, and the programs it
/// needs found.
pub fn build(p: &Params, link: &LinkSpec) -> Result<WorkloadSpec, ParamError> {
    let mut run = quiclab_model::run::build::build(p, link, &quiclab_outputs::input::read_input)?;
    // Checked before any lab starts, with the programs present: a run that cannot work costs
    // nothing.
    let server_program = |server: Server| {
        quiclab_peers::programs::server_program(server)
            .map(|_| ())
            .map_err(|e| refuse("server", format!("{e:#}")))
    };
    let chromium = |key: &'static str| {
        quiclab_browser::check_chromium(Path::new(quiclab_browser::DEFAULT_CHROMIUM))
            .map_err(|e| refuse(key, e.to_string()))
    };
    match &mut run {
        Run::Bulk(b) if b.server != Server::Quiclab || b.client != Client::Quiclab => {
            server_program(b.server)?;
            quiclab_peers::programs::client_program(b.client)
                .map_err(|e| refuse("client", format!("{e:#}")))?;
            if b.client == Client::Chromium {
                chromium("client")?;
            }
        }
        Run::Page(pr) => {
            pr.page.validate().map_err(|e| refuse("page", e))?;
            if pr.browser == Browser::Chromium {
                chromium("browser")?;
            }
            server_program(pr.server)?;
            pr.timeout = Some(pr.timeout.unwrap_or_else(|| pr.page.default_timeout(link)));
        }
        Run::Video(v) => {
            if v.server != Server::Quiclab {
                server_program(v.server)?;
            }
            if v.client == Client::Astream {
                quiclab_peers::astream::find().map_err(|e| refuse("client", format!("{e:#}")))?;
            }
        }
        _ => {}
    }
    Ok(match run {
        Run::Bulk(r) => WorkloadSpec::Bulk(r),
        Run::Page(r) => WorkloadSpec::Page(r),
        Run::Flows(r) => WorkloadSpec::Flows(r),
        Run::Video(r) => WorkloadSpec::Video(r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_model::WorkloadKind;
    use quiclab_model::keys::KEYS;

    /// The least a run of `kind` needs, with `key` left out (it is the one under test).
    fn base(kind: WorkloadKind, leave_out: &str) -> Params {
        let mut p = Params::new(kind);
        let needs: &[(&str, &str)] = match kind {
            WorkloadKind::Bulk => &[("size", "1MB"), ("protocol", "h3")],
            WorkloadKind::Page => &[("page", "carlucci-small"), ("protocol", "h3")],
            WorkloadKind::Flows => &[("flows", "h3 + h1"), ("duration", "10s")],
            WorkloadKind::Video => &[("players", "h3"), ("duration", "60s")],
        };
        for (key, value) in needs {
            if *key != leave_out {
                p.set(key, value).unwrap();
            }
        }
        // The link: one that the key under test can change or replace.
        let switching = matches!(
            leave_out,
            "switch"
                | "switch-gap"
                | "on_switch"
                | "switch_timeout"
                | "migrate_delay"
                | "transfer_timeout"
        );
        if !switching && leave_out != "profile" {
            p.set("rate", "12mbit").unwrap();
        }
        if !switching && leave_out != "delay" {
            p.set("rtt", "60ms").unwrap();
        }
        if switching && leave_out != "switch" {
            p.set("switch", "wifi@0s,lte@20s").unwrap();
        }
        p
    }

    fn built(p: &Params) -> Result<String, ParamError> {
        let spec = p
            .link
            .to_spec(&quiclab_outputs::input::read_input)
            .map_err(|e| refuse("link", e))?;
        Ok(format!("{:?}\n{:?}", p.link, build(p, &spec)?))
    }

    /// Adding a key is a row of the table and its use in `build`: a row whose value changes no
    /// run (and no link) is a key without a use, and fails here.
    #[test]
    fn every_key_reaches_the_run() {
        for key in KEYS {
            if key.example.is_empty() {
                continue;
            }
            let kind = WorkloadKind::ALL
                .into_iter()
                .find(|w| key.applies_to(*w))
                .unwrap();
            // What the example needs beside it to be a run that can be built.
            let mut with = base(kind, key.name);
            let mut without = base(kind, key.name);
            let companions: &[(&str, &str)] = match key.name {
                "zero_rtt" => &[("resume", "true")],
                "gquic_n" => &[("cc", "gquic-cubic")],
                "discover" | "shards" => &[("browser", "chromium")],
                "parallel" => &[("players", "h3")],
                "connections" | "transfer_timeout" => &[("players", "h1")],
                "reorder-delay" => &[("reorder", "2%")],
                "fec_in_cwnd" => &[("fec", "2")],
                "seek_check" => &[("seek", "20s:40s")],
                // curl speaks h1 and h2 only.
                "client" => &[("protocol", "h2")],
                "switch" | "profile" | "up-profile" | "down-profile" => &[],
                "size" if kind == WorkloadKind::Flows => &[("duration", "")],
                _ => &[],
            };
            for (k, v) in companions {
                if v.is_empty() {
                    continue;
                }
                with.set(k, v).unwrap();
                without.set(k, v).unwrap();
            }
            if key.name == "size" && kind == WorkloadKind::Flows {
                with = Params::new(kind);
                with.set("flows", "h3 + h1").unwrap();
                with.set("rate", "12mbit").unwrap();
                with.set("rtt", "60ms").unwrap();
            }
            if matches!(key.name, "discover" | "shards")
                && !Path::new(quiclab_browser::DEFAULT_CHROMIUM).exists()
            {
                continue;
            }
            with.set(key.name, key.example)
                .unwrap_or_else(|e| panic!("{} = {}: {e}", key.name, key.example));
            let a = built(&with).unwrap_or_else(|e| panic!("{} = {}: {e}", key.name, key.example));
            let b = built(&without);
            assert!(
                b.as_ref().map_or(true, |b| *b != a),
                "key {} = {:?} changes nothing in the run: a key without a use",
                key.name,
                key.example
            );
        }
    }

    /// AStream plays one h1 player from quiclab's server with its own queue limits: everything
    /// else is refused before any lab starts, naming the key (and, where it is all there is,
    /// what to install).
    #[test]
    fn astream_is_refused_where_it_cannot_play() {
        let refused = |extra: &[(&str, &str)], kind: WorkloadKind| {
            let mut p = base(kind, "players");
            p.set("client", "astream").unwrap();
            if kind == WorkloadKind::Video {
                p.set("players", "h1").unwrap();
            }
            for (k, v) in extra {
                p.set(k, v).unwrap();
            }
            built(&p).unwrap_err()
        };
        let e = refused(&[("players", "h3")], WorkloadKind::Video);
        assert_eq!(e.key, "client");
        assert!(e.message.contains("astream speaks h1 only"), "{e}");
        let e = refused(&[("connections", "4")], WorkloadKind::Video);
        assert_eq!(e.key, "connections");
        let e = refused(&[("buffer", "8s")], WorkloadKind::Video);
        assert_eq!(e.key, "buffer");
        assert!(e.message.contains("NETFLIX_BUFFER_SIZE"), "{e}");
        let e = refused(&[("seek", "10s:30s")], WorkloadKind::Video);
        assert_eq!(e.key, "seek");
        let e = refused(&[("server", "caddy")], WorkloadKind::Video);
        assert_eq!(e.key, "server");
        let e = refused(&[], WorkloadKind::Bulk);
        assert!(e.message.contains("astream runs video only"), "{e}");
        let mut chromium_video = base(WorkloadKind::Video, "");
        chromium_video.set("client", "chromium").unwrap();
        let e = built(&chromium_video).unwrap_err();
        assert!(e.message.contains("chromium runs bulk only"), "{e}");
        // A run AStream can play: without a checkout, what to set.
        if std::env::var_os(quiclab_peers::astream::ASTREAM_ENV).is_none() {
            let e = refused(&[], WorkloadKind::Video);
            assert_eq!(e.key, "client");
            assert!(e.message.contains("QUICLAB_ASTREAM"), "{e}");
        }
    }

    /// A player's `:CC` is the server's controller for its transport: it reaches the run's
    /// stack, players of one transport must agree, and a server of another implementation (which
    /// sends under its own) is refused.
    #[test]
    fn a_players_controller_reaches_the_servers_stack() {
        use quiclab_proto::options::Protocol;
        let video = |players: &str, extra: &[(&str, &str)]| {
            let mut p = base(WorkloadKind::Video, "players");
            p.set("players", players).unwrap();
            for (k, v) in extra {
                p.set(k, v).unwrap();
            }
            let spec = p.link.to_spec(&quiclab_outputs::input::read_input).unwrap();
            build(&p, &spec)
        };
        let Ok(WorkloadSpec::Video(run)) = video("h1 + h3:gquic-cubic", &[]) else {
            panic!("builds")
        };
        assert_eq!(run.stack.cc_name(Protocol::H3), "gquic-cubic");
        assert_eq!(run.stack.cc_name(Protocol::H1), "cubic");
        assert_eq!(run.contender(), "h1+h3:gquic-cubic");
        let Ok(WorkloadSpec::Video(run)) = video("h1:bbr + h3", &[]) else {
            panic!("builds")
        };
        assert_eq!(run.stack.cc_name(Protocol::H1), "bbr");
        assert_eq!(run.stack.cc_name(Protocol::H3), "cubic");
        let e = video("h3 + h3:bbr", &[]).unwrap_err();
        assert_eq!(e.key, "players");
        assert!(e.message.contains("one congestion controller"), "{e}");
        let e = video("h3:bbr", &[("server", "quic-go")]).unwrap_err();
        assert_eq!(e.key, "players");
        assert!(e.message.contains("quiclab's own server"), "{e}");
    }

    #[test]
    fn every_kind_builds_a_run_of_its_kind() {
        for kind in WorkloadKind::ALL {
            let p = base(kind, "");
            let spec = p.link.to_spec(&quiclab_outputs::input::read_input).unwrap();
            assert_eq!(build(&p, &spec).unwrap().kind(), kind);
        }
    }

    #[test]
    fn the_comparison_sees_only_what_changes_the_run() {
        // A value equal to the default builds the same run: the check above compares runs, not
        // what was written.
        let mut with = base(WorkloadKind::Bulk, "size");
        let without = with.clone();
        with.set("seed", "1").unwrap();
        with.set("size", "10MB").unwrap();
        assert_eq!(built(&with).unwrap(), built(&without).unwrap());
    }
}
