//! Adaptive bitrate rules: pure functions of what the player knows (past downloads, buffer,
//! ladder, the next segment's sizes), each as its paper defines it and as AStream (the seed's
//! player) implements it. docs/video.md lists every difference.
//!
//! - **BASIC** (AStream's `basic_dash2`, the seed's; it has no paper): the rate of the last 5
//!   downloads (2 live; Σ bits / Σ time); above 1.2 × the current bitrate, one level up;
//!   otherwise the highest level b with rate > 1.2 × b, else the lowest. Paced as AStream paces
//!   it: with more than `BASIC_THRESHOLD` segments queued (the buffer key in segments) it waits
//!   (qsize − threshold)·V before fetching.
//! - **SARA** (Juluri et al. 2015): H = size-weighted harmonic mean of the download rates of the
//!   last segments; with buffer B (s), I, B_α, B_β: B ≤ I → lowest; the next segment at the
//!   current level would take longer than B − I → the highest level that would not; B ≤ B_α →
//!   one level up if it fits; B ≤ B_β → the highest level ≥ current that fits; B > B_β → the
//!   same, delayed by B − B_β. Parameters (the seed's AStream configuration): I = 1 segment,
//!   B_α = 5, B_β = 10 segments, 5 samples. `sara-astream`: B counted in whole queued segments
//!   minus I; sizes in bits against a rate in bytes/s (download times 8× too long); 6 samples;
//!   the last rule's comparison inverted (tₗ > Tₐ); after a seek, 4 decisions see B = B_β.
//! - **BBA-2** (Huang et al. 2014): BBA-0's rate map f(B), linear from R_min at the reservoir to
//!   R_max at the upper reservoir, with its Rate+/Rate− hysteresis; a startup phase that steps up
//!   one level while a segment downloads fast enough (ΔB = V − download time > 0.875 V when the
//!   buffer is empty, relaxed linearly to 0.5 V at the upper reservoir) and ends when the buffer
//!   shrinks or the map proposes more. Reservoir 10 % and upper reservoir 90 % of the player's
//!   buffer (AStream's configuration of the seed). `bba2-astream`: occupancy in whole queued
//!   segments minus one over a 4-segment buffer, the map as a staircase of evenly spaced markers,
//!   no hysteresis, startup's ΔB with the mean segment size in bits against a rate in bytes/s,
//!   the map only once 2 segments are queued; after a seek, 4 decisions see a full buffer.

use serde::{Deserialize, Serialize};

/// The ABR rules quiclab implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbrKind {
    Basic,
    Sara,
    SaraAstream,
    Bba2,
    Bba2Astream,
}

/// The names `--abr` takes.
pub const ABR_NAMES: &[&str] = &[
    "basic",
    "basic-astream",
    "sara",
    "sara-astream",
    "bba2",
    "bba2-astream",
];

impl AbrKind {
    /// Parses an ABR name; `basic-astream` is `basic` (BASIC is AStream's own rule).
    pub fn parse(s: &str) -> Result<AbrKind, String> {
        Ok(match s.trim() {
            "basic" | "basic-astream" => AbrKind::Basic,
            "sara" => AbrKind::Sara,
            "sara-astream" => AbrKind::SaraAstream,
            "bba2" | "bba-2" => AbrKind::Bba2,
            "bba2-astream" | "bba-2-astream" => AbrKind::Bba2Astream,
            other => {
                return Err(format!(
                    "unknown ABR {other:?}; expected one of {}",
                    ABR_NAMES.join(", ")
                ));
            }
        })
    }

    /// AStream's rules (BASIC, and the `-astream` SARA and BBA-2) keep AStream's queue:
    /// unbounded (`MAX_BUFFER_SIZE = None`: the whole video) and with no live edge (AStream plays
    /// a live MPD's segments as it plays an on-demand one); each paces it by the delay it
    /// returns — BASIC above its threshold, SARA above B_β queued segments, BBA-2 at its buffer
    /// size. The paper rules fill the player's buffer up to its capacity instead.
    pub fn paces_itself(self) -> bool {
        matches!(
            self,
            AbrKind::Basic | AbrKind::SaraAstream | AbrKind::Bba2Astream
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            AbrKind::Basic => "basic",
            AbrKind::Sara => "sara",
            AbrKind::SaraAstream => "sara-astream",
            AbrKind::Bba2 => "bba2",
            AbrKind::Bba2Astream => "bba2-astream",
        }
    }
}

impl std::fmt::Display for AbrKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One finished segment download, as the ABR sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub level: usize,
    pub bytes: u64,
    /// Request to last byte, seconds.
    pub download_s: f64,
}

/// What the player knows when it chooses the next segment's level.
#[derive(Debug, Clone)]
pub struct AbrInput<'a> {
    /// Bitrates, bit/s, lowest first.
    pub bitrates: &'a [u64],
    /// The next segment's size at each level, bytes.
    pub next_sizes: &'a [u64],
    /// Mean segment size of each level, bytes.
    pub mean_sizes: &'a [f64],
    /// Every download so far, oldest first (the segments kept and the ones a seek threw away).
    pub history: &'a [Sample],
    /// Buffered media, seconds.
    pub buffer_s: f64,
    /// Whole segments queued and not yet started (AStream's `qsize`).
    pub queued_segments: usize,
    /// The player's buffer capacity, seconds.
    pub buffer_cap_s: f64,
    /// Nominal segment duration V, seconds.
    pub segment_s: f64,
    /// Live content (AStream's live configuration: BASIC averages 2 downloads, not 5).
    pub live: bool,
    /// Level of the last downloaded segment (None before the first).
    pub current: Option<usize>,
}

/// A choice: the next segment's level, and how long to wait before fetching it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub level: usize,
    pub delay_s: f64,
}

impl Decision {
    fn now(level: usize) -> Decision {
        Decision {
            level,
            delay_s: 0.0,
        }
    }
}

/// AStream's constants of the seed's configuration.
pub mod astream {
    /// `BASIC_DELTA_COUNT`: the downloads BASIC averages over — 5 on demand, 2 live (the fork's
    /// config_dash.py: "2 FOR LIVE video, 5 for VOD").
    pub fn basic_window(live: bool) -> usize {
        if live { 2 } else { 5 }
    }
    /// BASIC's safety factor.
    pub const BASIC_FACTOR: f64 = 1.2;
    /// `SARA_SAMPLE_COUNT` (5) plus the one the pop-before-append keeps.
    pub const SARA_WINDOW: usize = 6;
    /// SARA's I, B_α, B_β in segments.
    pub const SARA_I: usize = 1;
    pub const SARA_ALPHA: usize = 5;
    pub const SARA_BETA: usize = 10;
    /// The `buffer` key in AStream's terms: whole segments, at least one. It is BBA-2's
    /// `NETFLIX_BUFFER_SIZE` (the fork's 4, upstream's 60: 8 s of 2 s segments is the fork's)
    /// and BASIC's `BASIC_THRESHOLD` (the fork's "4 FOR LIVE video, 10 for VOD": the live
    /// value is 8 s of 2 s segments; 10 on demand is a 40 s buffer of 4 s segments).
    pub fn buffer_segments(buffer_cap_s: f64, segment_s: f64) -> usize {
        ((buffer_cap_s / segment_s).round() as usize).max(1)
    }
    pub const BBA_RESERVOIR: f64 = 0.1;
    pub const BBA_CUSHION: f64 = 0.9;
    /// `NETFLIX_INITIAL_FACTOR`.
    pub const BBA_INITIAL_FACTOR: f64 = 0.875;
    /// `NETFLIX_INITIAL_BUFFER`: segments queued before the map is consulted in startup.
    pub const BBA_INITIAL_BUFFER: i64 = 2;
    /// `JUMP_BUFFER_COUNTER_CONSTANT`: decisions after a seek that pretend a full buffer.
    pub const JUMP_DECISIONS: u32 = 4;
    /// AStream's units bug: MPD sizes in bits against download rates in bytes/s.
    pub const UNITS_FACTOR: f64 = 8.0;
}

/// SARA's window in the paper's form (the seed's `SARA_SAMPLE_COUNT`).
const SARA_WINDOW: usize = 5;

/// An ABR rule with the state it keeps between decisions (BBA-2's startup phase, AStream's
/// post-seek counter).
#[derive(Debug, Clone)]
pub struct Abr {
    pub kind: AbrKind,
    /// BBA-2: still in the startup phase.
    startup: bool,
    /// Buffer level at the previous decision (BBA-2 startup ends when it falls).
    last_buffer_s: Option<f64>,
    /// AStream: decisions left that pretend a full buffer after a seek.
    jump_left: u32,
}

impl Abr {
    pub fn new(kind: AbrKind) -> Abr {
        Abr {
            kind,
            startup: true,
            last_buffer_s: None,
            jump_left: 0,
        }
    }

    /// The player seeked: AStream's variants pretend a full buffer for the next decisions.
    pub fn on_seek(&mut self) {
        if matches!(self.kind, AbrKind::SaraAstream | AbrKind::Bba2Astream) {
            self.jump_left = astream::JUMP_DECISIONS;
        }
    }

    /// Whether BBA-2 is still in its startup phase (false for the other rules).
    pub fn in_startup(&self) -> bool {
        matches!(self.kind, AbrKind::Bba2 | AbrKind::Bba2Astream) && self.startup
    }

    /// Chooses the next segment's level.
    pub fn decide(&mut self, input: &AbrInput) -> Decision {
        let top = input.bitrates.len() - 1;
        let d = match self.kind {
            AbrKind::Basic => basic(input),
            AbrKind::Sara => sara(input),
            AbrKind::SaraAstream => {
                let jump = self.take_jump();
                sara_astream(input, jump)
            }
            AbrKind::Bba2 => Decision::now(self.bba2(input)),
            AbrKind::Bba2Astream => {
                let jump = self.take_jump();
                self.bba2_astream(input, jump)
            }
        };
        self.last_buffer_s = Some(input.buffer_s);
        Decision {
            level: d.level.min(top),
            delay_s: d.delay_s.max(0.0),
        }
    }

    fn take_jump(&mut self) -> bool {
        if self.jump_left > 0 {
            self.jump_left -= 1;
            true
        } else {
            false
        }
    }

    fn bba2(&mut self, input: &AbrInput) -> usize {
        let Some(cur) = input.current else {
            return 0;
        };
        let map = bba0(input, cur);
        if !self.startup {
            return map;
        }
        let Some(last) = input.history.last() else {
            return map;
        };
        let v = input.segment_s;
        let (reservoir, upper) = bba_reservoirs(input);
        // ΔB: how much the buffer grew while the last segment downloaded.
        let delta_b = v - last.download_s;
        // The step-up threshold: 0.875 V (8× faster than played) on an empty buffer, relaxed
        // linearly to 0.5 V (2×) at the upper reservoir.
        let fill = ((input.buffer_s - reservoir) / (upper - reservoir)).clamp(0.0, 1.0);
        let threshold = (0.875 - 0.375 * fill) * v;
        let mut startup = if delta_b > threshold { cur + 1 } else { cur };
        startup = startup.min(input.bitrates.len() - 1);
        let falling = self.last_buffer_s.is_some_and(|b| input.buffer_s < b);
        if map > startup || falling {
            self.startup = false;
            return map.max(if falling { 0 } else { startup });
        }
        startup
    }

    /// BBA-2 as AStream's `netflix_dash` and its loop run it: the level, and the wait once the
    /// queue holds the buffer size — (qsize − size + 1)·V, which the loop then sleeps as that
    /// many times V: V applied twice (the fork's code; kept, as the units bug is).
    fn bba2_astream(&mut self, input: &AbrInput, jump: bool) -> Decision {
        let level = self.bba2_astream_level(input, jump);
        let size = astream::buffer_segments(input.buffer_cap_s, input.segment_s);
        let v = input.segment_s;
        let over = input.queued_segments as i64 - size as i64 + 1;
        Decision {
            level,
            delay_s: if over > 0 { over as f64 * v * v } else { 0.0 },
        }
    }

    fn bba2_astream_level(&mut self, input: &AbrInput, jump: bool) -> usize {
        let size = astream::buffer_segments(input.buffer_cap_s, input.segment_s);
        let queued = (if jump { size } else { input.queued_segments }) as i64;
        // `available_video_segments = qsize - initial_buffer` (initial buffer 1 segment).
        let available = queued - 1;
        let Some(cur) = input.current else {
            self.startup = true;
            return 0;
        };
        if !self.startup {
            return netflix_map(input.bitrates.len(), available, size);
        }
        let mut next = cur;
        if let Some(last) = input.history.last() {
            let rate_bytes = last.bytes as f64 / last.download_s.max(1e-9);
            let delta_b =
                input.segment_s - input.mean_sizes[cur] * astream::UNITS_FACTOR / rate_bytes;
            if delta_b > astream::BBA_INITIAL_FACTOR * input.segment_s {
                next = (cur + 1).min(input.bitrates.len() - 1);
            }
        }
        if available >= astream::BBA_INITIAL_BUFFER {
            let map = netflix_map(input.bitrates.len(), available, size);
            if map > next {
                self.startup = false;
                next = map;
            }
        }
        next
    }
}

/// BASIC: AStream's `basic_dash2` and the wait its loop adds: with more than
/// `BASIC_THRESHOLD` segments queued (the buffer key in segments), (qsize − threshold)·V.
fn basic(input: &AbrInput) -> Decision {
    let threshold = astream::buffer_segments(input.buffer_cap_s, input.segment_s);
    let over = input.queued_segments.saturating_sub(threshold);
    Decision {
        level: basic_level(input),
        delay_s: over as f64 * input.segment_s,
    }
}

fn basic_level(input: &AbrInput) -> usize {
    let Some(cur) = input.current else {
        return 0;
    };
    let window = &input.history[input
        .history
        .len()
        .saturating_sub(astream::basic_window(input.live))..];
    let bytes: u64 = window.iter().map(|s| s.bytes).sum();
    let time: f64 = window.iter().map(|s| s.download_s).sum();
    if window.is_empty() || time <= 0.0 {
        return 0;
    }
    let rate = bytes as f64 * 8.0 / time;
    let b = input.bitrates;
    if rate > astream::BASIC_FACTOR * b[cur] as f64 {
        return (cur + 1).min(b.len() - 1);
    }
    b.iter()
        .rposition(|&x| rate > astream::BASIC_FACTOR * x as f64)
        .unwrap_or(0)
}

/// The size-weighted harmonic mean of the download rates of the last `window` samples, bytes/s:
/// Σ sᵢ / Σ (sᵢ / rᵢ) = Σ sᵢ / Σ dᵢ.
pub fn weighted_harmonic_rate(history: &[Sample], window: usize) -> f64 {
    let w = &history[history.len().saturating_sub(window)..];
    let bytes: u64 = w.iter().map(|s| s.bytes).sum();
    let time: f64 = w.iter().map(|s| s.download_s).sum();
    if time > 0.0 { bytes as f64 / time } else { 0.0 }
}

/// SARA as the paper defines it, buffer in seconds.
fn sara(input: &AbrInput) -> Decision {
    let v = input.segment_s;
    let (i, alpha, beta) = (
        astream::SARA_I as f64 * v,
        astream::SARA_ALPHA as f64 * v,
        astream::SARA_BETA as f64 * v,
    );
    let h = weighted_harmonic_rate(input.history, SARA_WINDOW);
    let b = input.buffer_s;
    let Some(cur) = input.current else {
        return Decision::now(0);
    };
    if h <= 0.0 || b <= i {
        return Decision::now(0);
    }
    let t = |l: usize| input.next_sizes[l] as f64 / h;
    let room = b - i;
    let highest_fitting = |from: usize, to: usize| (from..=to).rev().find(|&l| t(l) <= room);
    if t(cur) > room {
        return Decision::now(highest_fitting(0, cur.saturating_sub(1)).unwrap_or(0));
    }
    let top = input.bitrates.len() - 1;
    if b <= alpha {
        return Decision::now(if cur < top && t(cur + 1) <= room {
            cur + 1
        } else {
            cur
        });
    }
    let level = highest_fitting(cur, top).unwrap_or(cur);
    if b <= beta {
        Decision::now(level)
    } else {
        Decision {
            level,
            delay_s: b - beta,
        }
    }
}

/// SARA as AStream's `weighted_dash` implements it.
fn sara_astream(input: &AbrInput, jump: bool) -> Decision {
    let v = input.segment_s;
    let queued = (if jump {
        astream::SARA_BETA
    } else {
        input.queued_segments
    }) as i64;
    let available = queued - astream::SARA_I as i64;
    let ta = available as f64 * v;
    let h = weighted_harmonic_rate(input.history, astream::SARA_WINDOW);
    let Some(cur) = input.current else {
        return Decision::now(0);
    };
    if h <= 0.0 || available == 0 {
        return Decision::now(0);
    }
    let t = |l: usize| input.next_sizes[l] as f64 * astream::UNITS_FACTOR / h;
    let top = input.bitrates.len() - 1;
    if t(cur) > ta {
        return Decision::now((0..cur).rev().find(|&l| t(l) < ta).unwrap_or(0));
    }
    if available <= astream::SARA_ALPHA as i64 {
        return Decision::now(if cur < top && t(cur + 1) < ta {
            cur + 1
        } else {
            cur
        });
    }
    if available <= astream::SARA_BETA as i64 {
        return Decision::now((cur..=top).rev().find(|&l| t(l) < ta).unwrap_or(cur));
    }
    // The inverted comparison is AStream's.
    let level = (cur..=top).rev().find(|&l| t(l) > ta).unwrap_or(cur);
    Decision {
        level,
        delay_s: (queued - astream::SARA_BETA as i64) as f64 * v,
    }
}

/// BBA's reservoir and upper reservoir (reservoir + cushion), seconds.
fn bba_reservoirs(input: &AbrInput) -> (f64, f64) {
    (
        astream::BBA_RESERVOIR * input.buffer_cap_s,
        astream::BBA_CUSHION * input.buffer_cap_s,
    )
}

/// BBA-0 (Huang et al. 2014, Algorithm 1): the rate map with Rate+/Rate− hysteresis.
fn bba0(input: &AbrInput, cur: usize) -> usize {
    let b = input.bitrates;
    let top = b.len() - 1;
    let (reservoir, upper) = bba_reservoirs(input);
    let buf = input.buffer_s;
    if buf <= reservoir {
        return 0;
    }
    if buf >= upper {
        return top;
    }
    let f = b[0] as f64 + (buf - reservoir) / (upper - reservoir) * (b[top] - b[0]) as f64;
    let rate_plus = b[(cur + 1).min(top)] as f64;
    let rate_minus = b[cur.saturating_sub(1)] as f64;
    if f >= rate_plus {
        // max{R_i : R_i < f(B)}
        b.iter().rposition(|&x| (x as f64) < f).unwrap_or(0)
    } else if f <= rate_minus {
        // min{R_i : R_i > f(B)}
        b.iter().position(|&x| (x as f64) > f).unwrap_or(top)
    } else {
        cur
    }
}

/// AStream's `get_rate_netflix`: occupancy = available segments / buffer size; the lowest level
/// at or below the reservoir, the highest at or above the cushion, and between them the level of
/// the first of evenly spaced markers at or above the occupancy.
fn netflix_map(levels: usize, available: i64, size: usize) -> usize {
    let pct = available as f64 / size as f64;
    let (r, c) = (astream::BBA_RESERVOIR, astream::BBA_CUSHION);
    if pct <= r {
        return 0;
    }
    if pct >= c {
        return levels - 1;
    }
    // Markers: r → level 0, r + k·step → level k, c → the top level.
    let step = (c - r) / (levels - 1) as f64;
    (0..levels)
        .find(|&k| {
            let marker = if k == levels - 1 {
                c
            } else {
                r + k as f64 * step
            };
            marker >= pct
        })
        .unwrap_or(levels - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: [u64; 5] = [500_000, 1_000_000, 2_000_000, 3_000_000, 4_000_000];
    const V: f64 = 4.0;

    fn sizes() -> Vec<u64> {
        LADDER.iter().map(|b| b / 8 * 4).collect()
    }

    fn mean_sizes() -> Vec<f64> {
        sizes().iter().map(|&s| s as f64).collect()
    }

    /// Downloads at `mbps` of segments at `level`.
    fn at(mbps: f64, level: usize, n: usize) -> Vec<Sample> {
        let bytes = LADDER[level] / 8 * 4;
        vec![
            Sample {
                level,
                bytes,
                download_s: bytes as f64 * 8.0 / (mbps * 1e6),
            };
            n
        ]
    }

    fn input<'a>(
        history: &'a [Sample],
        next: &'a [u64],
        means: &'a [f64],
        buffer_s: f64,
        current: Option<usize>,
    ) -> AbrInput<'a> {
        AbrInput {
            bitrates: &LADDER,
            next_sizes: next,
            mean_sizes: means,
            history,
            buffer_s,
            queued_segments: (buffer_s / V).floor() as usize,
            buffer_cap_s: 20.0,
            segment_s: V,
            live: false,
            current,
        }
    }

    #[test]
    fn basic_steps_up_one_level_and_drops_to_what_the_rate_carries() {
        let (next, means) = (sizes(), mean_sizes());
        let mut abr = Abr::new(AbrKind::Basic);
        // Nothing downloaded: the lowest level.
        assert_eq!(abr.decide(&input(&[], &next, &means, 0.0, None)).level, 0);
        // 10 Mbit/s > 1.2 × 0.5: one level up only.
        let h = at(10.0, 0, 3);
        assert_eq!(abr.decide(&input(&h, &next, &means, 4.0, Some(0))).level, 1);
        // 3 Mbit/s at level 3 (3 Mbit/s): not > 3.6, so the highest b with 3 > 1.2 b: 2 Mbit/s.
        let h = at(3.0, 3, 5);
        assert_eq!(abr.decide(&input(&h, &next, &means, 8.0, Some(3))).level, 2);
        // 0.5 Mbit/s: nothing fits with the margin: the lowest.
        let h = at(0.5, 2, 5);
        assert_eq!(abr.decide(&input(&h, &next, &means, 8.0, Some(2))).level, 0);
        // Only the last 5 downloads count: 5 slow ones after many fast ones.
        let mut h = at(100.0, 1, 10);
        h.extend(at(1.0, 1, 5));
        assert_eq!(abr.decide(&input(&h, &next, &means, 8.0, Some(1))).level, 0);
    }

    /// AStream's loop around `basic_dash2`: no wait up to `BASIC_THRESHOLD` queued segments (the
    /// buffer key in segments: 20 s of 4 s = 5), then (qsize − 5)·V; live it averages the last 2
    /// downloads, not 5.
    #[test]
    fn basic_waits_above_its_threshold_and_live_averages_two_downloads() {
        let (next, means) = (sizes(), mean_sizes());
        let mut abr = Abr::new(AbrKind::Basic);
        let h = at(10.0, 0, 3);
        let mut i = input(&h, &next, &means, 20.0, Some(0));
        assert_eq!(i.queued_segments, 5);
        assert_eq!(abr.decide(&i), Decision::now(1));
        i.queued_segments = 7;
        assert_eq!(
            abr.decide(&i),
            Decision {
                level: 1,
                delay_s: 2.0 * V
            }
        );
        // 3 slow downloads then 2 fast ones: on demand the slow ones weigh (level 0), live only
        // the last two count (one level up).
        let mut h = at(0.5, 1, 3);
        h.extend(at(20.0, 1, 2));
        let mut i = input(&h, &next, &means, 8.0, Some(1));
        assert_eq!(abr.decide(&i).level, 0);
        i.live = true;
        assert_eq!(abr.decide(&i).level, 2);
    }

    #[test]
    fn sara_follows_the_papers_rules() {
        let (next, means) = (sizes(), mean_sizes());
        let mut abr = Abr::new(AbrKind::Sara);
        let h = at(4.0, 1, 5); // H = 4 Mbit/s = 500 000 B/s
        // B ≤ I (4 s): the lowest.
        assert_eq!(abr.decide(&input(&h, &next, &means, 4.0, Some(3))).level, 0);
        // B = 8 s: room B − I = 4 s. At level 3 the next segment (1.5 MB) takes 3 s: fits; B ≤ α
        // (20 s): one up if level 4 (2 MB, 4 s) fits: 4 ≤ 4, yes.
        assert_eq!(abr.decide(&input(&h, &next, &means, 8.0, Some(3))).level, 4);
        // B = 6 s: room 2 s; level 3 takes 3 s > 2: down to the highest that fits (level 1:
        // 0.5 MB, 1 s; level 2: 1 MB, 2 s ≤ 2).
        assert_eq!(abr.decide(&input(&h, &next, &means, 6.0, Some(3))).level, 2);
        // Level 4 (top) with room: stays.
        assert_eq!(
            abr.decide(&input(&h, &next, &means, 12.0, Some(4))).level,
            4
        );
        // No samples: the lowest.
        assert_eq!(
            abr.decide(&input(&[], &next, &means, 12.0, Some(2))).level,
            0
        );
    }

    #[test]
    fn sara_between_alpha_and_beta_jumps_and_above_beta_delays() {
        let (next, means) = (sizes(), mean_sizes());
        let h = at(40.0, 0, 5);
        let mut abr = Abr::new(AbrKind::Sara);
        let mut i = input(&h, &next, &means, 24.0, Some(0));
        i.buffer_cap_s = 60.0;
        // B = 24 s > α = 20 s: the highest level ≥ current that fits.
        assert_eq!(abr.decide(&i), Decision::now(4));
        i.buffer_s = 44.0;
        // B > β = 40 s: same level, 4 s later.
        assert_eq!(
            abr.decide(&i),
            Decision {
                level: 4,
                delay_s: 4.0
            }
        );
    }

    #[test]
    fn sara_astream_counts_segments_and_sees_times_eight_times_too_long() {
        let (next, means) = (sizes(), mean_sizes());
        let h = at(4.0, 1, 6);
        let mut abr = Abr::new(AbrKind::SaraAstream);
        // 2 queued segments: available = 1, Tₐ = 4 s. Level 0's next segment (250 kB) at
        // 500 kB/s takes 0.5 s, seen as 4 s: not < 4, and level 1 is current → down to the lowest.
        let mut i = input(&h, &next, &means, 8.0, Some(1));
        assert_eq!(abr.decide(&i).level, 0);
        // The paper's SARA at the same point goes up (room 4 s, level 2 takes 2 s).
        assert_eq!(Abr::new(AbrKind::Sara).decide(&i).level, 2);
        // After a seek, 4 decisions pretend B = β (available 9, Tₐ = 36 s): aggressive rule.
        abr.on_seek();
        i.queued_segments = 0;
        for _ in 0..4 {
            assert_eq!(abr.decide(&i).level, 4);
        }
        assert_eq!(abr.decide(&i).level, 0);
    }

    #[test]
    fn bba2_starts_up_by_download_speed_then_follows_the_map() {
        let (next, means) = (sizes(), mean_sizes());
        let mut abr = Abr::new(AbrKind::Bba2);
        assert_eq!(abr.decide(&input(&[], &next, &means, 0.0, None)).level, 0);
        // Level 0 downloaded in 0.2 s: ΔB = 3.8 s > 0.875 × 4 = 3.5: one up.
        let h = [Sample {
            level: 0,
            bytes: 250_000,
            download_s: 0.2,
        }];
        assert_eq!(abr.decide(&input(&h, &next, &means, 4.0, Some(0))).level, 1);
        assert!(abr.in_startup());
        // Downloaded in 1 s: ΔB = 3 s; at B = 8 s the threshold is relaxed to
        // (0.875 − 0.375 × (8 − 2)/(18 − 2)) × 4 = 2.9375 s: still up.
        let h = [Sample {
            level: 1,
            bytes: 500_000,
            download_s: 1.0,
        }];
        assert_eq!(abr.decide(&input(&h, &next, &means, 8.0, Some(1))).level, 2);
        // The buffer fell (8 → 6 s): startup ends; the map at 6 s gives
        // f = 0.5 + (6 − 2)/16 × 3.5 = 1.375 Mbit/s; at level 2 (Rate− = 1 Mbit/s) that is
        // between Rate− and Rate+: stay.
        let h = [Sample {
            level: 2,
            bytes: 1_000_000,
            download_s: 6.0,
        }];
        assert_eq!(abr.decide(&input(&h, &next, &means, 6.0, Some(2))).level, 2);
        assert!(!abr.in_startup());
        // Now the map alone: B = 17 s: f = 0.5 + 15/16 × 3.5 = 3.78 ≥ Rate+ (3) → max R < f = 3 M.
        assert_eq!(
            abr.decide(&input(&h, &next, &means, 17.0, Some(2))).level,
            3
        );
        // Reservoir and upper reservoir.
        assert_eq!(abr.decide(&input(&h, &next, &means, 1.0, Some(3))).level, 0);
        assert_eq!(
            abr.decide(&input(&h, &next, &means, 19.0, Some(0))).level,
            4
        );
        // f = 0.5 + (3 − 2)/16 × 3.5 = 0.72 ≤ Rate− (1 M) at level 2 → min R > f = 1 M.
        assert_eq!(abr.decide(&input(&h, &next, &means, 3.0, Some(2))).level, 1);
    }

    #[test]
    fn bba2_astream_uses_its_staircase_after_two_queued_segments() {
        let (next, means) = (sizes(), mean_sizes());
        let mut abr = Abr::new(AbrKind::Bba2Astream);
        // A 16 s buffer of 4 s segments: AStream's NETFLIX_BUFFER_SIZE 4 (the seed's fork).
        fn in16<'a>(
            h: &'a [Sample],
            (next, means): (&'a [u64], &'a [f64]),
            b: f64,
            cur: Option<usize>,
        ) -> AbrInput<'a> {
            AbrInput {
                buffer_cap_s: 16.0,
                ..input(h, next, means, b, cur)
            }
        }
        let ladder = (&next[..], &means[..]);
        assert_eq!(astream::buffer_segments(16.0, V), 4);
        assert_eq!(astream::buffer_segments(8.0, 2.0), 4);
        assert_eq!(abr.decide(&in16(&[], ladder, 0.0, None)).level, 0);
        // A fast download (0.2 s for 250 kB = 1.25 MB/s): ΔB = 4 − 250 000 × 8 / 1.25e6 = 2.4 s,
        // not > 3.5 s (the paper's rule would step up): stay.
        let h = [Sample {
            level: 0,
            bytes: 250_000,
            download_s: 0.2,
        }];
        assert_eq!(abr.decide(&in16(&h, ladder, 4.0, Some(0))).level, 0);
        // 3 queued: available 2 (≥ 2), occupancy 0.5: markers 0.1, 0.3, 0.5, 0.7, 0.9 → level 2.
        assert_eq!(abr.decide(&in16(&h, ladder, 12.0, Some(0))).level, 2);
        assert!(!abr.in_startup());
        // Running: 5 queued → available 4, occupancy 1 ≥ 0.9: the top; and the queue is at the
        // buffer size: AStream waits (5 − 4 + 1)·V, times V again.
        let full = abr.decide(&in16(&h, ladder, 20.0, Some(2)));
        assert_eq!((full.level, full.delay_s), (4, 2.0 * V * V));
        // 1 queued → available 0: the lowest.
        assert_eq!(abr.decide(&in16(&h, ladder, 4.0, Some(4))).level, 0);
        // Occupancy 0.25 on the seed's 20 levels: the first marker ≥ 0.25 is 0.1 + 4 × 0.8/19.
        assert_eq!(netflix_map(20, 1, 4), 4);
    }

    #[test]
    fn names_parse_and_unknown_ones_list_the_choices() {
        assert_eq!(AbrKind::parse("bba2-astream"), Ok(AbrKind::Bba2Astream));
        assert_eq!(AbrKind::parse("basic-astream"), Ok(AbrKind::Basic));
        let e = AbrKind::parse("festive").unwrap_err();
        assert!(e.contains("sara-astream"), "{e}");
    }
}
