//! AStream (the Python DASH player seed 004 used: github pari685/AStream and the seed's fork) as a
//! reference client: what a server must offer it — its dialect of the MPD and its segment URLs —
//! and how its logs read as quiclab's player records. The shell serves the files, runs the
//! player and hands the logs' text here.
//!
//! AStream reads a static `SegmentTemplate` MPD with one `SegmentSize` per segment, fetches an
//! init segment first (at the lowest level, played as one segment of media) and then the media
//! segments, one at a time over a new urllib2 connection each. It logs a JSON summary
//! (`ASTREAM_LOGS/ASTREAM_*.json`: every download's name, bitrate, size and time; the
//! interruptions) and a buffer log (`DASH_BUFFER_LOG_*`: the queue at every write and play).

use serde::Deserialize;

use crate::content::Content;
use crate::player::{PlayerEvent, PlayerMetrics, SegmentRecord};

/// The init segment's size (the ITEC dataset's Big Buck Bunny init segments are under 1 kB).
pub const INIT_BYTES: u64 = 800;

/// Sizes the MPD lists past the content's end: AStream asks for one segment more than its
/// duration holds (its URL list runs until the sum of durations exceeds it), served at a whole
/// segment's size.
const EXTRA_SEGMENTS: usize = 4;

/// Where the MPD of `content` is.
pub fn mpd_path(content: &Content) -> String {
    format!("/astream/{}.mpd", content.name)
}

/// Whether AStream can be given `content`: its URL template cannot hold `$` or `%`, and it
/// reads the segment duration as whole seconds.
pub fn check(content: &Content) -> Result<(), String> {
    if content.name.contains(['$', '%', '/']) {
        return Err(format!(
            "content {:?}: AStream's URL template cannot hold '$', '%' or '/'",
            content.name
        ));
    }
    if !content.segment_ms.is_multiple_of(1000) {
        return Err(format!(
            "content {:?} has {} ms segments: AStream reads the segment duration as whole seconds",
            content.name, content.segment_ms
        ));
    }
    Ok(())
}

/// The MPD AStream reads: every representation of `content` with a `SegmentTemplate` in
/// AStream's own dialect (`$Number$%d`: its parser drops `$Number$` and fills `%d`) and a
/// `SegmentSize` in bytes per segment.
pub fn mpd(content: &Content) -> String {
    let d = iso_duration(content.duration_ms);
    let name = &content.name;
    let mut out = vec![
        r#"<?xml version="1.0" encoding="UTF-8"?>"#.to_string(),
        format!(
            r#"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" minBufferTime="PT1.500000S" type="static" mediaPresentationDuration="{d}" profiles="urn:mpeg:dash:profile:isoff-live:2011">"#
        ),
        format!(r#"  <Period duration="{d}">"#),
        r#"    <AdaptationSet mimeType="video/mp4" segmentAlignment="true" group="1">"#.to_string(),
    ];
    for (rep, &b) in content.bitrates_bps.iter().enumerate() {
        out.push(format!(
            r#"      <Representation id="{b}bps" mimeType="video/mp4" codecs="avc1.42c00d" width="480" height="360" startWithSAP="1" bandwidth="{b}">"#
        ));
        out.push(format!(
            r#"        <SegmentTemplate timescale="1000" media="astream/{name}/$Bandwidth$/s$Number$%d.m4s" startNumber="1" duration="{}" initialization="astream/{name}/$Bandwidth$/init.mp4"/>"#,
            content.segment_ms
        ));
        for n in 0..content.segments() + EXTRA_SEGMENTS {
            out.push(format!(
                r#"        <SegmentSize id="s{}.m4s" size="{}" scale="bytes"/>"#,
                n + 1,
                segment_bytes(content, rep, n)
            ));
        }
        out.push("      </Representation>".into());
    }
    out.extend([
        "    </AdaptationSet>".into(),
        "  </Period>".into(),
        "</MPD>".into(),
        String::new(),
    ]);
    out.join("\n")
}

/// Bytes of 0-based segment n at `rep`: the content's, or a whole segment's past its end.
fn segment_bytes(content: &Content, rep: usize, n: usize) -> u64 {
    content
        .size(rep, n)
        .unwrap_or_else(|| (content.bitrates_bps[rep] * content.segment_ms).div_ceil(8000))
}

fn iso_duration(ms: u64) -> String {
    let s = ms as f64 / 1e3;
    let h = (s / 3600.0).floor();
    let m = ((s - h * 3600.0) / 60.0).floor();
    format!(
        "PT{}H{}M{:.3}S",
        h as u64,
        m as u64,
        s - h * 3600.0 - m * 60.0
    )
}

/// What a request for AStream's paths asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Resource {
    Mpd(String),
    /// Bytes of this many (synthetic: AStream counts them).
    Bytes(u64),
}

/// The answer to `path` among `contents`, if it is one of AStream's paths:
/// `/astream/<name>.mpd`, `/astream/<name>/<bandwidth>/init.mp4`,
/// `/astream/<name>/<bandwidth>/s<n>.m4s` (n from 1).
pub fn resolve(contents: &[Content], path: &str) -> Option<Resource> {
    let rest = path.strip_prefix("/astream/")?;
    if let Some(name) = rest.strip_suffix(".mpd") {
        let c = contents.iter().find(|c| c.name == name)?;
        return Some(Resource::Mpd(mpd(c)));
    }
    let mut parts = rest.split('/');
    let (name, bandwidth, file) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let c = contents.iter().find(|c| c.name == name)?;
    let bandwidth: u64 = bandwidth.parse().ok()?;
    let rep = c.bitrates_bps.iter().position(|&b| b == bandwidth)?;
    if file == "init.mp4" {
        return Some(Resource::Bytes(INIT_BYTES));
    }
    let n: usize = file.strip_prefix('s')?.strip_suffix(".m4s")?.parse().ok()?;
    if n == 0 || n > c.segments() + EXTRA_SEGMENTS {
        return None;
    }
    Some(Resource::Bytes(segment_bytes(c, rep, n - 1)))
}

/// AStream's `-p` name for a quiclab ABR rule: its three rules are BASIC, SARA (`sara`; its
/// code calls it SMART) and BBA-2 (`netflix`). quiclab's `sara` and `sara-astream` both ask
/// AStream for its one SARA, and so on.
pub fn playback_name(abr: crate::AbrKind) -> &'static str {
    use crate::AbrKind::*;
    match abr {
        Basic => "basic",
        Sara | SaraAstream => "sara",
        Bba2 | Bba2Astream => "netflix",
    }
}

/// The JSON summary AStream writes (`configure_log_file.write_json`).
#[derive(Deserialize)]
struct Summary {
    playback_info: PlaybackInfo,
    /// (segment file name, bitrate, bytes, download seconds), in download order.
    #[serde(default)]
    segment_info: Vec<(String, f64, f64, f64)>,
}

#[derive(Deserialize)]
struct PlaybackInfo {
    /// Epoch seconds: set at the first write, then again when playback starts.
    start_time: Option<f64>,
    end_time: Option<f64>,
    /// From the player's start (after the MPD) to playback.
    initial_buffering_duration: Option<f64>,
    interruptions: Interruptions,
}

#[derive(Deserialize)]
struct Interruptions {
    count: u64,
    /// (start, end), epoch seconds.
    #[serde(default)]
    events: Vec<(f64, f64)>,
    total_duration: f64,
}

/// One row of the buffer log.
#[derive(Debug, Clone, PartialEq)]
struct BufferRow {
    /// Seconds: from the first write (upstream) or epoch (see [`read_buffer_log`]).
    t: f64,
    /// AStream's playback timer (whole seconds; the init segment counts as one segment).
    playback_s: f64,
    /// Segments queued and not yet playing (`qsize`).
    queued: u64,
    action: String,
    bitrate: f64,
}

/// The buffer log's rows: comma-separated with times in seconds from the first write
/// (upstream), or `;`-separated with epoch milliseconds (the seed's fork). Returns the rows and
/// whether their times are epoch seconds.
fn read_buffer_log(text: &str) -> Result<(Vec<BufferRow>, bool), String> {
    let delimiter = if text.matches(';').count() > text.matches(',').count() {
        ';'
    } else {
        ','
    };
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(delimiter).map(str::trim).collect();
        if line.trim().is_empty() || f.first() == Some(&"EpochTime") {
            continue;
        }
        if f.len() < 6 {
            return Err(format!(
                "buffer log line {}: {} fields, expected 6",
                i + 1,
                f.len()
            ));
        }
        let num = |k: usize| {
            f[k].parse::<f64>().map_err(|_| {
                format!(
                    "buffer log line {}: field {} {:?} is not a number",
                    i + 1,
                    k + 1,
                    f[k]
                )
            })
        };
        rows.push(BufferRow {
            t: num(0)?,
            playback_s: num(1)?,
            queued: num(2)? as u64,
            action: f[4].to_string(),
            bitrate: num(5)?,
        });
    }
    let epoch = rows.first().is_some_and(|r| r.t > 1e9);
    if epoch && rows.first().is_some_and(|r| r.t > 1e11) {
        for r in &mut rows {
            r.t /= 1e3;
        }
    }
    Ok((rows, epoch))
}

/// One AStream run, in quiclab's player records. Times count from `origin_epoch_s` (when the
/// shell started AStream).
#[derive(Debug, Clone, PartialEq)]
pub struct Playback {
    pub metrics: PlayerMetrics,
    pub segments: Vec<SegmentRecord>,
    pub events: Vec<PlayerEvent>,
    /// (s since the origin, queued segments × V): AStream's buffer as it counts it.
    pub buffer_points: Vec<(f64, f64)>,
}

/// Reads AStream's JSON summary and buffer log of a run of `content`.
///
/// - Segments: the media downloads of the summary (the init segment apart), each with its
///   bitrate, bytes and download time; its request is its write in the buffer log less its
///   download time, its buffer the queue after it × V.
/// - `avg_bitrate_mbps` over the media downloads (the seed's "average playback bitrate");
///   `played_bitrate_mbps` over the segments played (the init segment apart).
/// - Rebuffering and stalls: AStream's interruptions; startup: its `initial_buffering_duration`
///   (from its player's start, after the MPD, to playback); media played: its playback timer at
///   the end less the init segment's V seconds.
pub fn read_logs(
    content: &Content,
    summary_json: &str,
    buffer_log: &str,
    origin_epoch_s: f64,
) -> Result<Playback, String> {
    let summary: Summary =
        serde_json::from_str(summary_json).map_err(|e| format!("AStream's JSON summary: {e}"))?;
    let (rows, epoch) = read_buffer_log(buffer_log)?;
    let info = &summary.playback_info;
    let v = content.segment_s();
    // The buffer log's clock: upstream counts from the first write. The summary's start_time is
    // set again when playback starts, as the row "InitialBuffering-Play" is written.
    let anchor = if epoch {
        0.0
    } else {
        let play_row = rows.iter().find(|r| r.action == "InitialBuffering-Play");
        match (info.start_time, play_row) {
            (Some(start), Some(row)) => start - row.t,
            _ => return Err("AStream's logs: playback never started".into()),
        }
    };
    let at = |t_log: f64| anchor + t_log - origin_epoch_s;
    let writes: Vec<&BufferRow> = rows.iter().filter(|r| r.action == "Writing").collect();
    let mut segments = Vec::new();
    let mut previous_level = None;
    let mut switches = 0;
    for (i, (name, bitrate, bytes, download_s)) in summary.segment_info.iter().enumerate() {
        if name.starts_with("init") {
            continue;
        }
        let n: usize = name
            .strip_prefix('s')
            .and_then(|s| s.strip_suffix(".m4s"))
            .and_then(|s| s.parse().ok())
            .filter(|&n: &usize| n >= 1)
            .ok_or_else(|| format!("AStream's summary: segment name {name:?}"))?;
        let level = content
            .bitrates_bps
            .iter()
            .position(|&b| b as f64 == *bitrate)
            .ok_or_else(|| format!("AStream's summary: bitrate {bitrate} is not in the ladder"))?;
        if previous_level.is_some_and(|p| p != level) {
            switches += 1;
        }
        previous_level = Some(level);
        let write = writes.get(i);
        let arrived = write.map(|w| at(w.t));
        segments.push(SegmentRecord {
            segment: n - 1,
            level,
            bitrate_bps: *bitrate as u64,
            request_s: arrived.map_or(f64::NAN, |t| t - download_s),
            download_s: *download_s,
            bytes: *bytes as u64,
            throughput_mbps: if *download_s > 0.0 {
                bytes * 8.0 / download_s / 1e6
            } else {
                f64::NAN
            },
            buffer_s: write.map_or(f64::NAN, |w| w.queued as f64 * v),
            discarded: false,
            connections: Vec::new(),
        });
    }
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let downloaded: Vec<f64> = segments
        .iter()
        .map(|s| s.bitrate_bps as f64 / 1e6)
        .collect();
    // The first segment played is the init segment.
    let played: Vec<f64> = rows
        .iter()
        .filter(|r| r.action == "StillPlaying")
        .skip(1)
        .map(|r| r.bitrate / 1e6)
        .collect();
    let timer_end = rows.iter().map(|r| r.playback_s).fold(0.0, f64::max);
    let played_s = (timer_end - v).max(0.0);
    let rebuffer_s = info.interruptions.total_duration;
    let rebuffer_rate = (played_s + rebuffer_s > 0.0).then(|| rebuffer_s / (played_s + rebuffer_s));
    let ended = rows
        .iter()
        .any(|r| r.action == "TheEnd" || r.action == "Play-End");
    let metrics = PlayerMetrics {
        avg_bitrate_mbps: mean(&downloaded),
        played_bitrate_mbps: mean(&played),
        rebuffer_s,
        rebuffer_rate,
        rebuffer_rate_with_seeks: rebuffer_rate,
        stalls: info.interruptions.count,
        startup_s: info.initial_buffering_duration,
        seek_waits_s: Vec::new(),
        bitrate_switches: switches,
        segments: segments.len() as u64,
        discarded_segments: 0,
        played_s,
        ended,
    };
    let mut events = Vec::new();
    if let Some(start) = info.start_time {
        events.push(PlayerEvent {
            t_s: start - origin_epoch_s,
            kind: "start".into(),
        });
    }
    for &(from, to) in &info.interruptions.events {
        events.push(PlayerEvent {
            t_s: from - origin_epoch_s,
            kind: "stall".into(),
        });
        events.push(PlayerEvent {
            t_s: to - origin_epoch_s,
            kind: "resume".into(),
        });
    }
    if let Some(end) = info.end_time {
        events.push(PlayerEvent {
            t_s: end - origin_epoch_s,
            kind: "end".into(),
        });
    }
    events.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let buffer_points = rows
        .iter()
        .map(|r| (at(r.t), r.queued as f64 * v))
        .collect();
    Ok(Playback {
        metrics,
        segments,
        events,
        buffer_points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content() -> Content {
        Content::cbr("t", 2000, 5000, &[1_000_000, 2_000_000])
    }

    #[test]
    fn the_mpd_lists_every_segment_in_astreams_dialect_and_the_paths_resolve() {
        let c = content();
        let text = mpd(&c);
        assert!(
            text.contains(r#"mediaPresentationDuration="PT0H0M5.000S""#),
            "{text}"
        );
        assert!(text.contains(r#"media="astream/t/$Bandwidth$/s$Number$%d.m4s""#));
        assert!(text.contains(r#"duration="2000""#));
        // Three segments (the last one 1 s: 125 000 B at 1 Mbit/s) and 4 more at a whole size.
        assert!(text.contains(r#"<SegmentSize id="s3.m4s" size="125000" scale="bytes"/>"#));
        assert!(text.contains(r#"<SegmentSize id="s4.m4s" size="250000" scale="bytes"/>"#));
        assert_eq!(text.matches("<SegmentSize").count(), 2 * 7);
        let all = [c.clone()];
        assert_eq!(resolve(&all, "/astream/t.mpd"), Some(Resource::Mpd(text)));
        assert_eq!(
            resolve(&all, "/astream/t/2000000/init.mp4"),
            Some(Resource::Bytes(INIT_BYTES))
        );
        assert_eq!(
            resolve(&all, "/astream/t/2000000/s1.m4s"),
            Some(Resource::Bytes(500_000))
        );
        assert_eq!(
            resolve(&all, "/astream/t/1000000/s3.m4s"),
            Some(Resource::Bytes(125_000))
        );
        for bad in [
            "/astream/t/1000000/s0.m4s",
            "/astream/t/1000000/s8.m4s",
            "/astream/t/999/s1.m4s",
            "/astream/u.mpd",
            "/astream/t/1000000/s1.m4s/x",
            "/video/t/0/0",
        ] {
            assert_eq!(resolve(&all, bad), None, "{bad}");
        }
        assert!(check(&c).is_ok());
        assert!(check(&Content::cbr("a%b", 2000, 4000, &[1])).is_err());
        assert!(
            check(&Content::cbr("a", 2500, 5000, &[1]))
                .unwrap_err()
                .contains("whole seconds")
        );
        assert_eq!(playback_name(crate::AbrKind::Bba2Astream), "netflix");
        assert_eq!(playback_name(crate::AbrKind::Sara), "sara");
    }

    /// AStream's logs as upstream writes them (dash_client.py's `segment_info` tuples,
    /// dash_buffer.py's `log_entry` rows): the init segment, then s1 at 1 Mbit/s and s2, s3 at
    /// 2 Mbit/s; one interruption of 0.5 s; the player started 0.3 s after the origin.
    #[test]
    fn astreams_logs_read_as_quiclabs_player_records() {
        let origin = 1_000.0;
        let summary = r#"{"playback_info": {"start_time": 1000.5, "end_time": 1007.0,
            "initial_buffering_duration": 0.2,
            "interruptions": {"count": 1, "events": [[1004.0, 1004.5]], "total_duration": 0.5},
            "up_shifts": 1, "down_shifts": 0},
            "segment_info": [["init.mp4", 1000000, 800, 0.1], ["s1.m4s", 1000000, 250000, 0.4],
                             ["s2.m4s", 2000000, 500000, 1.0], ["s3.m4s", 2000000, 250000, 0.5]],
            "playback_type": "sara"}"#;
        let buffer_log =
            "EpochTime,CurrentPlaybackTime,CurrentBufferSize,CurrentPlaybackState,Action,Bitrate
0,0,0,INITIAL_BUFFERING,Starting,0
0.0,0,1,INITIAL_BUFFERING,Writing,1000000
0.1,0,0,PLAY,InitialBuffering-Play,0
0.1,0,0,PLAY,StillPlaying,1000000
0.5,0,1,PLAY,Writing,1000000
1.5,1,2,PLAY,Writing,2000000
2.1,2,1,PLAY,StillPlaying,1000000
2.0,2,2,PLAY,Writing,2000000
4.1,4,1,PLAY,StillPlaying,2000000
6.1,6,0,PLAY,StillPlaying,2000000
6.5,5,0,END,TheEnd,0
";
        let p = read_logs(&content(), summary, buffer_log, origin).unwrap();
        // The first write is at 1000.5 − 0.1 = 1000.4: 0.4 s after the origin.
        assert_eq!(p.segments.len(), 3);
        let s = &p.segments[0];
        assert_eq!((s.segment, s.level, s.bytes), (0, 0, 250_000));
        assert!(
            (s.request_s - (0.4 + 0.5 - 0.4)).abs() < 1e-9,
            "{}",
            s.request_s
        );
        assert!((s.throughput_mbps - 5.0).abs() < 1e-9);
        assert!((s.buffer_s - 2.0).abs() < 1e-9);
        assert_eq!(p.segments[2].segment, 2);
        let m = &p.metrics;
        assert!((m.avg_bitrate_mbps.unwrap() - 5.0 / 3.0).abs() < 1e-9);
        // Played: s1 (1 Mbit/s) and s2, s3 (2 Mbit/s), not the init.
        assert!((m.played_bitrate_mbps.unwrap() - 5.0 / 3.0).abs() < 1e-9);
        assert_eq!(m.stalls, 1);
        assert_eq!(m.rebuffer_s, 0.5);
        // The timer reached 6 s, 2 of them the init segment's.
        assert_eq!(m.played_s, 4.0);
        assert!((m.rebuffer_rate.unwrap() - 0.5 / 4.5).abs() < 1e-12);
        assert_eq!(m.startup_s, Some(0.2));
        assert_eq!(m.bitrate_switches, 1);
        assert!(m.ended);
        let kinds: Vec<&str> = p.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["start", "stall", "resume", "end"]);
        assert!((p.events[1].t_s - 4.0).abs() < 1e-9);
        assert_eq!(p.buffer_points.len(), 11);
    }

    #[test]
    fn the_forks_buffer_log_and_broken_logs() {
        // The fork: ';' and epoch milliseconds.
        let summary = r#"{"playback_info": {"start_time": 1795000000.5, "end_time": null,
            "initial_buffering_duration": 1.0,
            "interruptions": {"count": 0, "events": [], "total_duration": 0}},
            "segment_info": [["init.mp4", 1000000, 800, 0.5], ["s1.m4s", 2000000, 500000, 0.5]]}"#;
        let log =
            "EpochTime;CurrentPlaybackTime;CurrentBufferSize;CurrentPlaybackState;Action;Bitrate
1795000000400;0;1;INITIAL_BUFFERING;Writing;1000000
1795000000500;0;0;PLAY;InitialBuffering-Play;0
1795000001000;0;1;PLAY;Writing;2000000
";
        let origin = 1_795_000_000.0;
        let p = read_logs(&content(), summary, log, origin).unwrap();
        assert!(
            (p.segments[0].request_s - 0.5).abs() < 1e-6,
            "{}",
            p.segments[0].request_s
        );
        assert!(!p.metrics.ended);
        assert_eq!(p.metrics.played_bitrate_mbps, None);
        let bad_rate = summary.replace("2000000, 500000", "3000000, 500000");
        assert!(
            read_logs(&content(), &bad_rate, log, origin)
                .unwrap_err()
                .contains("ladder")
        );
        assert!(
            read_logs(&content(), "{", log, origin)
                .unwrap_err()
                .contains("JSON")
        );
        let e = read_logs(&content(), summary, "1;2;3\n", origin).unwrap_err();
        assert!(e.contains("line 1") && e.contains("3 fields"), "{e}");
    }
}
