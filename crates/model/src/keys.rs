//! Every key a run takes, in one table.

/// Keys accepted in `[workload]` when `kind = "bulk"`.
pub const BULK_KEYS: &[&str] = &[
    "kind",
    "size",
    "on_switch",
    "switch_timeout",
    "migrate_delay",
];

/// Keys accepted in `[workload]` when `kind = "page"`: `page` is a built-in page name or a
/// directory with an index.html; `browser` is `builtin` or `chromium`; `max_streams` limits the
/// concurrent requests of h2/h3.
pub const PAGE_KEYS: &[&str] = &["kind", "page", "browser", "max_streams", "warm", "discover"];

/// Keys accepted in `[workload]` when `kind = "flows"`: `flows` is the mix (an array of flow specs
/// `PROTO[:CC]`, or one string `h3:gquic-cubic + h1`; in `[grid]` each value is one mix);
/// `duration` (each flow reads this long) or `size` (each flow downloads this much); `offsets`
/// (start offsets, one per flow); `bin` (per-flow series) and `cutoff` (left out at both ends).
pub const FLOWS_KEYS: &[&str] = &[
    "kind", "flows", "duration", "size", "offsets", "bin", "cutoff",
];

/// Keys accepted in `[workload]` when `kind = "video"`: `players` (the contender: one player spec
/// `PROTO[/K]` or a mix `h1 + h3`; in `[grid]` each value is one mix), `abr`, `content` (a built-in
/// name or a Sabre movie JSON file), `live`, `seek` (`40s:100s,150s:200s`), `duration` (play only
/// this much of the content), `seek_policy`, `buffer` (capacity), `connections` (K for h1 players),
/// `parallel` (K for h2/h3 players); with a `switch` schedule in `[link]`, `on_switch`
/// (`reconnect`, `reconnect-0rtt`, `migrate`), `switch_timeout` and `migrate_delay` (as bulk).
pub const VIDEO_KEYS: &[&str] = &[
    "kind",
    "players",
    "abr",
    "content",
    "live",
    "seek",
    "duration",
    "seek_policy",
    "buffer",
    "connections",
    "parallel",
    "on_switch",
    "switch_timeout",
    "migrate_delay",
];

/// Keys accepted in `[protocol]` (and as `[grid]` axes).
pub const PROTOCOL_KEYS: &[&str] = &[
    "protocol",
    "tls",
    "cc",
    "resume",
    "zero_rtt",
    "fec",
    "ip",
    "quic_mtu",
    "quic_pmtud",
    "alt_svc",
];

/// `[protocol]` keys that a flows or video run (which names each flow's protocol in its mix)
/// applies to all of its flows or players.
pub const MIX_WIDE_PROTOCOL_KEYS: &[&str] =
    &["tls", "fec", "ip", "quic_mtu", "quic_pmtud", "alt_svc"];
