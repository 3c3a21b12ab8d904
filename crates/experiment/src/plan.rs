//! Grid expansion: a [`Scenario`] becomes an ordered list of [`RunSpec`]s.
//!
//! A *setting* is one grid point without the protocol (e.g. rate=10mbit,
//! loss=2%). Each setting is measured `repetitions` times with every
//! protocol; the protocols of one repetition share a seed so they meet the
//! same emulated random losses, which makes their comparison paired. The
//! same holds for the other axes that name the client being compared rather
//! than the network ([`is_client_axis`]: the built-in loader and Chromium).

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::scenario::{Order, Scenario};

/// One run of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSpec {
    /// Position in execution order (0-based).
    pub index: usize,
    /// Index of the network/workload setting: the grid point without the
    /// protocol, counted in grid order (first axis outermost).
    pub setting: usize,
    /// 1-based repetition number.
    pub repetition: u32,
    /// Merged parameters: `[link]`, then `[workload]`, then `[protocol]`,
    /// then the grid values of this run (later ones override).
    pub params: BTreeMap<String, String>,
    /// Deterministic seed; see [`run_seed`].
    pub seed: u64,
    /// Stable identity, e.g. `proto=h2;rate=10mbit;loss=2%;rep=3`: the
    /// protocol, the other grid axes in file order, the repetition. Used to
    /// skip runs already done when a plan is resumed.
    pub key: String,
    /// What this run is compared as: its protocol (`h1`, `h2`, `h3`) for runs of one protocol;
    /// workloads that mix protocols in one run describe the mix (`h3+h1`, `h3x2+h1x2`). Reports
    /// group runs by it; the key's first part is `proto=<contender>`.
    pub contender: String,
}

/// Whether a grid axis chooses the client under comparison, not the network or the workload (its
/// row's `client_axis`): like the protocol, it stays out of the seed, so e.g. the built-in loader
/// and Chromium loading a page in the same repetition meet the same random-loss draws.
pub fn is_client_axis(key: &str) -> bool {
    quiclab_model::keys::KEYS
        .iter()
        .any(|k| k.name == key && k.client_axis)
}

/// Seed of a run, from the scenario seed, the setting key (grid values
/// without the protocol, e.g. `rate=10mbit;loss=2%`) and the repetition.
///
/// FNV-1a 64 over the three, then the SplitMix64 finaliser to spread the
/// bits. Hand-written because std's `DefaultHasher` may change between
/// releases, and a rerun must reproduce the same losses. Changing this
/// function changes every stored run's seed; a test pins one value.
pub fn run_seed(scenario_seed: u64, setting_key: &str, repetition: u32) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let bytes = scenario_seed
        .to_le_bytes()
        .into_iter()
        .chain(setting_key.bytes())
        // 0xff never occurs in UTF-8, so it separates key and repetition.
        .chain([0xff])
        .chain(repetition.to_le_bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    // SplitMix64 finaliser.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Expands the grid × repetitions into runs in the scenario's [`Order`]:
///
/// * `Sequential`: grid points in grid order (first axis outermost, the
///   protocol axis where it appears), repetitions innermost per point.
/// * `Interleaved`: for each setting, for each repetition, every protocol in
///   turn (h1, h2, h3, then the next repetition), so slow drift of the
///   machine does not favour one protocol.
/// * `Random`: the interleaved list shuffled with ChaCha8 seeded from the
///   scenario seed (reproducible).
pub fn expand(s: &Scenario) -> Vec<RunSpec> {
    let mut runs = Vec::new();
    for_each_run(s, |r| {
        runs.push(r);
        true
    });
    runs
}

/// Streams the runs of [`expand`] to `f` in the same order with the same indices, building one
/// run at a time (a dry run of a large plan lists it without holding it): `f` returns false to
/// stop. Only a random order holds a compact permutation (12 bytes a run).
pub fn for_each_run(s: &Scenario, mut f: impl FnMut(RunSpec) -> bool) {
    let mut base = BTreeMap::new();
    for table in [&s.link, &s.workload, &s.protocol] {
        for (k, v) in table {
            base.insert(k.clone(), v.value.to_string());
        }
    }

    // The contender axis: the protocol, or for flows the mix.
    let contender_key = s.kind.contender_key();
    let proto_axis = s.grid.iter().position(|(k, _)| k == contender_key);
    let key_name = if contender_key == quiclab_model::keys::PROTOCOL.name {
        "proto"
    } else {
        contender_key
    };
    // Non-protocol axes, in file order.
    let others: Vec<usize> = (0..s.grid.len())
        .filter(|&i| Some(i) != proto_axis)
        .collect();
    let other_dims: Vec<usize> = others.iter().map(|&i| s.grid[i].1.len()).collect();
    let n_settings: usize = other_dims.iter().product();
    // The coordinates of setting `i` (mixed radix, first axis outermost), as `product` numbers
    // them.
    let setting_coords = |mut i: usize| -> Vec<usize> {
        let mut c = vec![0; other_dims.len()];
        for (slot, &d) in c.iter_mut().zip(&other_dims).rev() {
            *slot = i % d;
            i /= d;
        }
        c
    };
    // A scenario built by hand without a protocol axis still expands, with
    // runs that carry no protocol.
    let n_protos = proto_axis.map_or(1, |p| s.grid[p].1.len());

    // Builds the run of (setting, protocol index, repetition); index is set
    // once the order is known.
    let make = |setting: usize, proto: usize, rep: u32| -> RunSpec {
        let mut params = base.clone();
        let mut setting_parts = Vec::new();
        for (&axis, &vi) in others.iter().zip(&setting_coords(setting)) {
            let (k, vals) = &s.grid[axis];
            let v = vals[vi].value.to_string();
            setting_parts.push(format!("{k}={v}"));
            params.insert(k.clone(), v);
        }
        let seed_key = others
            .iter()
            .zip(&setting_parts)
            .filter(|&(&axis, _)| !is_client_axis(&s.grid[axis].0))
            .map(|(_, part)| part.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let mut key_parts = Vec::new();
        let mut contender = String::new();
        if let Some(p) = proto_axis {
            let v = s.grid[p].1[proto].value.to_string();
            key_parts.push(format!("{key_name}={v}"));
            params.insert(contender_key.to_string(), v.clone());
            contender = v;
        }
        key_parts.extend(setting_parts);
        key_parts.push(format!("rep={rep}"));
        RunSpec {
            index: 0,
            setting,
            repetition: rep,
            params,
            seed: run_seed(s.seed, &seed_key, rep),
            key: key_parts.join(";"),
            contender,
        }
    };

    // Points the scenario excludes (combinations that cannot run) are left out before numbering.
    let mut index = 0;
    let mut emit = |setting: usize, proto: usize, rep: u32| -> bool {
        let mut r = make(setting, proto, rep);
        if s.excludes(&r.params) {
            return true;
        }
        r.index = index;
        index += 1;
        f(r)
    };
    match s.order {
        Order::Sequential => {
            // Grid points in grid order (the protocol axis where it stands), repetitions
            // innermost: the protocol's place among the axes decides how it nests.
            let p_pos =
                proto_axis.map_or(others.len(), |p| others.iter().filter(|&&o| o < p).count());
            let outer: usize = other_dims[..p_pos].iter().product();
            let inner: usize = other_dims[p_pos..].iter().product();
            for o in 0..outer {
                for proto in 0..n_protos {
                    for i in 0..inner {
                        let setting = o * inner + i;
                        for rep in 1..=s.repetitions {
                            if !emit(setting, proto, rep) {
                                return;
                            }
                        }
                    }
                }
            }
        }
        Order::Interleaved => {
            for setting in 0..n_settings {
                for rep in 1..=s.repetitions {
                    for proto in 0..n_protos {
                        if !emit(setting, proto, rep) {
                            return;
                        }
                    }
                }
            }
        }
        Order::Random => {
            // The interleaved list's coordinates, shuffled exactly as the runs themselves were
            // (a shuffle depends only on the length and the generator): the same order.
            let mut order: Vec<(u32, u32, u32)> =
                Vec::with_capacity(n_settings * n_protos * s.repetitions as usize);
            for setting in 0..n_settings {
                for rep in 1..=s.repetitions {
                    for proto in 0..n_protos {
                        order.push((setting as u32, proto as u32, rep));
                    }
                }
            }
            order.shuffle(&mut ChaCha8Rng::seed_from_u64(s.seed));
            for (setting, proto, rep) in order {
                if !emit(setting as usize, proto as usize, rep) {
                    return;
                }
            }
        }
    }
}

/// The most repetitions a scenario or `--repetitions` may ask for.
pub const MAX_REPETITIONS: u32 = 10_000;

/// The most runs a plan may hold: a plan is built, listed and estimated in memory before it runs
/// (≈ 1 kB a run), and a million runs of even 10 s each would take 4 months.
pub const MAX_PLAN_RUNS: u64 = 1_000_000;

/// Counts the runs of `s`'s plan before it is built (before exclusions, which only remove), and
/// refuses a plan over [`MAX_PLAN_RUNS`] naming the product of its axes.
pub fn check_plan_size(s: &Scenario) -> Result<u64, String> {
    let mut n: u128 = u128::from(s.repetitions);
    let mut parts = Vec::new();
    for (k, v) in &s.grid {
        n = n.saturating_mul(v.len() as u128);
        parts.push(format!("{} ({k})", v.len()));
    }
    parts.push(format!("{} repetitions", s.repetitions));
    if s.repetitions > MAX_REPETITIONS {
        return Err(format!(
            "repetitions = {}: expected 1 to {MAX_REPETITIONS}",
            s.repetitions
        ));
    }
    if n > u128::from(MAX_PLAN_RUNS) {
        return Err(format!(
            "the plan has {} = {n} runs; at most {MAX_PLAN_RUNS} are allowed (split the grid into \
             several scenarios, or fewer repetitions)",
            parts.join(" × ")
        ));
    }
    Ok(n as u64)
}

/// Expected total duration: the sum of `per_run` over the runs.
pub fn estimate_seconds(runs: &[RunSpec], per_run: impl Fn(&RunSpec) -> f64) -> f64 {
    runs.iter().map(per_run).sum()
}

/// One of `n` disjoint parts of a plan (`--shard K/N`, `k` from 1 to `n`): what one machine runs
/// when a grid is spread over many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub k: u32,
    pub n: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(v: &str) -> Result<Shard, String> {
        let bad =
            || format!("expected K/N with 1 ≤ K ≤ N (the K-th of N shards), e.g. 2/8; got {v:?}");
        let (k, n) = v.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// The runs of `plan` in `shard`, in plan order. Runs are grouped by their seed — one setting's
/// repetition with all its contenders, which meet the same random draws and are compared pair by
/// pair, so a group is never split — and the groups, numbered in plan order, are dealt round-robin:
/// every run lands in exactly one shard for any N, and the same plan and K/N give the same runs.
pub fn shard_of(plan: &[RunSpec], shard: Shard) -> Vec<RunSpec> {
    let mut filter = ShardFilter::new(shard);
    plan.iter().filter(|r| filter.keeps(r)).cloned().collect()
}

/// [`shard_of`] one run at a time, for runs streamed in plan order ([`for_each_run`]).
#[derive(Debug, Clone)]
pub struct ShardFilter {
    shard: Shard,
    /// Each seed's group number, in the order groups first appear.
    groups: BTreeMap<u64, usize>,
}

impl ShardFilter {
    pub fn new(shard: Shard) -> ShardFilter {
        ShardFilter {
            shard,
            groups: BTreeMap::new(),
        }
    }

    /// Whether `r`, the next run of the plan, is in the shard.
    pub fn keeps(&mut self, r: &RunSpec) -> bool {
        let next = self.groups.len();
        let g = *self.groups.entry(r.seed).or_insert(next);
        g % self.shard.n as usize == (self.shard.k - 1) as usize
    }
}

#[cfg(test)]
mod tests {
    // The plan as it was built before it was streamed (commit aef940b): every run held, the
    // interleaved list shuffled whole. `for_each_run` must give exactly this, in this order.
    fn product(dims: &[usize]) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for &d in dims {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    (0..d).map(move |i| {
                        let mut p = prefix.clone();
                        p.push(i);
                        p
                    })
                })
                .collect();
        }
        out
    }

    fn reference_expand(s: &Scenario) -> Vec<RunSpec> {
        let mut base = BTreeMap::new();
        for table in [&s.link, &s.workload, &s.protocol] {
            for (k, v) in table {
                base.insert(k.clone(), v.value.to_string());
            }
        }

        // The contender axis: the protocol, or for flows the mix.
        let contender_key = s.kind.contender_key();
        let proto_axis = s.grid.iter().position(|(k, _)| k == contender_key);
        let key_name = if contender_key == quiclab_model::keys::PROTOCOL.name {
            "proto"
        } else {
            contender_key
        };
        // Non-protocol axes, in file order.
        let others: Vec<usize> = (0..s.grid.len())
            .filter(|&i| Some(i) != proto_axis)
            .collect();
        let other_dims: Vec<usize> = others.iter().map(|&i| s.grid[i].1.len()).collect();
        let settings = product(&other_dims);
        // A scenario built by hand without a protocol axis still expands, with
        // runs that carry no protocol.
        let n_protos = proto_axis.map_or(1, |p| s.grid[p].1.len());

        // Builds the run of (setting, protocol index, repetition); index is set
        // once the order is known.
        let make = |setting: usize, proto: usize, rep: u32| -> RunSpec {
            let mut params = base.clone();
            let mut setting_parts = Vec::new();
            for (&axis, &vi) in others.iter().zip(&settings[setting]) {
                let (k, vals) = &s.grid[axis];
                let v = vals[vi].value.to_string();
                setting_parts.push(format!("{k}={v}"));
                params.insert(k.clone(), v);
            }
            let seed_key = others
                .iter()
                .zip(&setting_parts)
                .filter(|&(&axis, _)| !is_client_axis(&s.grid[axis].0))
                .map(|(_, part)| part.as_str())
                .collect::<Vec<_>>()
                .join(";");
            let mut key_parts = Vec::new();
            let mut contender = String::new();
            if let Some(p) = proto_axis {
                let v = s.grid[p].1[proto].value.to_string();
                key_parts.push(format!("{key_name}={v}"));
                params.insert(contender_key.to_string(), v.clone());
                contender = v;
            }
            key_parts.extend(setting_parts);
            key_parts.push(format!("rep={rep}"));
            RunSpec {
                index: 0,
                setting,
                repetition: rep,
                params,
                seed: run_seed(s.seed, &seed_key, rep),
                key: key_parts.join(";"),
                contender,
            }
        };

        let reps = 1..=s.repetitions;
        let mut runs = Vec::with_capacity(settings.len() * n_protos * s.repetitions as usize);
        match s.order {
            Order::Sequential => {
                let dims: Vec<usize> = s.grid.iter().map(|(_, v)| v.len()).collect();
                for point in product(&dims) {
                    // Mixed-radix index of the non-protocol coordinates, matching
                    // the numbering of `settings`.
                    let setting = others
                        .iter()
                        .zip(&other_dims)
                        .fold(0, |acc, (&axis, &d)| acc * d + point[axis]);
                    let proto = proto_axis.map_or(0, |p| point[p]);
                    for rep in reps.clone() {
                        runs.push(make(setting, proto, rep));
                    }
                }
            }
            Order::Interleaved | Order::Random => {
                for setting in 0..settings.len() {
                    for rep in reps.clone() {
                        for proto in 0..n_protos {
                            runs.push(make(setting, proto, rep));
                        }
                    }
                }
                if s.order == Order::Random {
                    runs.shuffle(&mut ChaCha8Rng::seed_from_u64(s.seed));
                }
            }
        }
        // Points the scenario excludes (combinations that cannot run) are left out before numbering.
        runs.retain(|r| !s.excludes(&r.params));
        for (i, r) in runs.iter_mut().enumerate() {
            r.index = i;
        }
        runs
    }

    #[test]
    fn the_streamed_plan_is_the_plan_as_it_was_built_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.display().to_string();
            let Ok(s) = crate::scenario::parse(&text, &file) else {
                continue;
            };
            let mut forms = vec![s.clone()];
            if s.quick.is_some() {
                forms.push(s.quick_form(&file).unwrap());
            }
            for form in forms {
                for order in [Order::Sequential, Order::Interleaved, Order::Random] {
                    let mut s = form.clone();
                    s.order = order;
                    s.repetitions = s.repetitions.min(3);
                    assert_eq!(expand(&s), reference_expand(&s), "{file} {order:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 60, "only {checked} plans compared");
        // Stopping early stops: the first three runs, and no more built.
        let s = crate::scenario::parse(
            &std::fs::read_to_string(dir.join("demo.toml")).unwrap(),
            "demo.toml",
        )
        .unwrap();
        let mut n = 0;
        for_each_run(&s, |_| {
            n += 1;
            n < 3
        });
        assert_eq!(n, 3);
    }

    use std::collections::BTreeSet;

    use super::*;
    use crate::scenario::parse;

    fn scenario(order: &str) -> Scenario {
        let text = format!(
            r#"name = "t"
repetitions = 10
seed = 1
order = "{order}"
[workload]
kind = "bulk"
size = "5MB"
[link]
rtt = "50ms"
rate = "1mbit"
[grid]
protocol = ["h1", "h2", "h3"]
rate = ["3mbit", "10mbit"]
loss = ["0%", "2%"]
"#
        );
        parse(&text, "t.toml").unwrap()
    }

    #[test]
    fn counts_and_unique_keys() {
        for order in ["interleaved", "random", "sequential"] {
            let runs = expand(&scenario(order));
            assert_eq!(runs.len(), 3 * 2 * 2 * 10);
            let keys: BTreeSet<_> = runs.iter().map(|r| r.key.clone()).collect();
            assert_eq!(keys.len(), runs.len());
            assert!(runs.iter().enumerate().all(|(i, r)| r.index == i));
        }
    }

    #[test]
    fn params_merge_with_grid_overrides() {
        let runs = expand(&scenario("interleaved"));
        let r = &runs[0];
        assert_eq!(r.key, "proto=h1;rate=3mbit;loss=0%;rep=1");
        assert_eq!(r.params["rtt"], "50ms");
        assert_eq!(r.params["rate"], "3mbit"); // grid beats [link]
        assert_eq!(r.params["kind"], "bulk");
        assert_eq!(r.params["size"], "5MB");
        assert_eq!(r.params["protocol"], "h1");
        assert_eq!(r.params["loss"], "0%");
    }

    #[test]
    fn interleaved_order() {
        let runs = expand(&scenario("interleaved"));
        for (i, chunk) in runs.chunks(3).enumerate() {
            let protos: Vec<&str> = chunk
                .iter()
                .map(|r| r.params["protocol"].as_str())
                .collect();
            assert_eq!(protos, ["h1", "h2", "h3"]);
            assert!(
                chunk
                    .iter()
                    .all(|r| r.setting == chunk[0].setting && r.repetition == chunk[0].repetition)
            );
            // Settings outermost, repetitions next.
            assert_eq!(chunk[0].setting, i / 10);
            assert_eq!(chunk[0].repetition as usize, i % 10 + 1);
        }
    }

    #[test]
    fn sequential_order() {
        let runs = expand(&scenario("sequential"));
        // First point: h1, 3mbit, 0% × 10 reps; then h1, 3mbit, 2%.
        assert!(
            runs[..10]
                .iter()
                .all(|r| r.key.starts_with("proto=h1;rate=3mbit;loss=0%;"))
        );
        assert_eq!(runs[9].repetition, 10);
        assert_eq!(runs[10].key, "proto=h1;rate=3mbit;loss=2%;rep=1");
        assert_eq!(runs[40].key, "proto=h2;rate=3mbit;loss=0%;rep=1");
        // Setting numbering agrees with the interleaved plan.
        let inter = expand(&scenario("interleaved"));
        let by_key: BTreeMap<_, _> = inter.iter().map(|r| (&r.key, r)).collect();
        for r in &runs {
            assert_eq!(r.setting, by_key[&r.key].setting);
            assert_eq!(r.seed, by_key[&r.key].seed);
        }
    }

    #[test]
    fn seeds_shared_by_protocols_and_distinct_otherwise() {
        let runs = expand(&scenario("interleaved"));
        let mut by_pair: BTreeMap<(usize, u32), BTreeSet<u64>> = BTreeMap::new();
        for r in &runs {
            by_pair
                .entry((r.setting, r.repetition))
                .or_default()
                .insert(r.seed);
        }
        assert_eq!(by_pair.len(), 4 * 10);
        assert!(by_pair.values().all(|s| s.len() == 1));
        let distinct: BTreeSet<u64> = by_pair.values().flatten().copied().collect();
        assert_eq!(distinct.len(), 40);
    }

    #[test]
    fn client_axes_share_the_seed_like_protocols() {
        let text = r#"name = "t"
repetitions = 2
[workload]
kind = "page"
[grid]
protocol = ["h1", "h3"]
page = ["carlucci-small", "carlucci-large"]
browser = ["builtin", "chromium"]
"#;
        let runs = expand(&parse(text, "t.toml").unwrap());
        assert_eq!(runs.len(), 2 * 2 * 2 * 2);
        let mut by_page_rep: BTreeMap<(String, u32), BTreeSet<u64>> = BTreeMap::new();
        for r in &runs {
            by_page_rep
                .entry((r.params["page"].clone(), r.repetition))
                .or_default()
                .insert(r.seed);
        }
        // Both browsers and both protocols of a (page, repetition): one seed; four seeds in all.
        assert!(
            by_page_rep.values().all(|s| s.len() == 1),
            "{by_page_rep:?}"
        );
        let distinct: BTreeSet<u64> = by_page_rep.values().flatten().copied().collect();
        assert_eq!(distinct.len(), 4);
        // The browser still makes settings and keys of their own.
        let settings: BTreeSet<usize> = runs.iter().map(|r| r.setting).collect();
        assert_eq!(settings.len(), 4);
        assert!(runs[0].key.contains("browser="), "{}", runs[0].key);
    }

    #[test]
    fn keys_and_seeds_are_stable() {
        // Pinned (cross-checked with an independent Python FNV-1a + SplitMix64): if this fails, the hash changed and stored runs would no
        // longer be reproduced by a rerun.
        assert_eq!(run_seed(1, "rate=10mbit;loss=2%", 3), 0xfe6b_b636_4dc7_4337);
        let runs = expand(&scenario("interleaved"));
        let r = runs
            .iter()
            .find(|r| r.key == "proto=h2;rate=10mbit;loss=2%;rep=3")
            .unwrap();
        assert_eq!(r.seed, run_seed(1, "rate=10mbit;loss=2%", 3));
        assert_eq!(expand(&scenario("interleaved")), runs);
        // The scenario seed matters.
        assert_ne!(run_seed(2, "rate=10mbit;loss=2%", 3), r.seed);
    }

    #[test]
    fn random_is_a_reproducible_permutation() {
        let inter = expand(&scenario("interleaved"));
        let a = expand(&scenario("random"));
        let b = expand(&scenario("random"));
        assert_eq!(a, b);
        assert_ne!(
            a.iter().map(|r| &r.key).collect::<Vec<_>>(),
            inter.iter().map(|r| &r.key).collect::<Vec<_>>()
        );
        let mut ka: Vec<_> = a.iter().map(|r| (r.key.clone(), r.seed)).collect();
        let mut ki: Vec<_> = inter.iter().map(|r| (r.key.clone(), r.seed)).collect();
        ka.sort();
        ki.sort();
        assert_eq!(ka, ki);
    }

    #[test]
    fn default_protocols_and_estimate() {
        let text = "name = \"t\"\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n";
        let s = parse(text, "t.toml").unwrap();
        let runs = expand(&s);
        let keys: Vec<&str> = runs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["proto=h1;rep=1", "proto=h2;rep=1", "proto=h3;rep=1"]);
        assert_eq!(estimate_seconds(&runs, |_| 2.5), 7.5);
    }

    #[test]
    fn shards_cover_the_plan_once_and_keep_a_repetition_together() {
        for order in ["interleaved", "random", "sequential"] {
            let plan = expand(&scenario(order));
            for n in 1..=17u32 {
                let mut seen: BTreeMap<String, u32> = BTreeMap::new();
                let mut by_seed: BTreeMap<u64, u32> = BTreeMap::new();
                for k in 1..=n {
                    let part = shard_of(&plan, Shard { k, n });
                    // Stable: the same K/N gives the same runs.
                    assert_eq!(part, shard_of(&plan, Shard { k, n }));
                    for r in part {
                        *seen.entry(r.key.clone()).or_default() += 1;
                        // All runs of one seed (a setting's repetition) in one shard.
                        assert_eq!(*by_seed.entry(r.seed).or_insert(k), k, "{order} {n}");
                    }
                }
                assert_eq!(seen.len(), plan.len(), "{order} N = {n}");
                assert!(seen.values().all(|&c| c == 1), "{order} N = {n}");
            }
        }
        // 40 groups over 3 shards: 14, 13, 13 groups of 3 runs.
        let plan = expand(&scenario("interleaved"));
        let sizes: Vec<usize> = (1..=3)
            .map(|k| shard_of(&plan, Shard { k, n: 3 }).len())
            .collect();
        assert_eq!(sizes, [42, 39, 39]);
    }

    #[test]
    fn a_shard_is_k_of_n() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { k: 2, n: 8 }));
        assert_eq!(Shard { k: 2, n: 8 }.to_string(), "2/8");
        for bad in ["3/2", "0/0", "0/4", "1", "a/b", "1/0", "-1/2"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("1 ≤ K ≤ N") && e.contains(bad), "{e}");
        }
    }
}
