//! Waterfall figures: a non-empty SVG always, a PNG when a font exists.

use std::path::Path;

use quiclab_page::har::ObjectTiming;
use quiclab_page::waterfall::{WaterfallOptions, find_font, svg_string, write_waterfall};

fn objects() -> Vec<ObjectTiming> {
    (0..12)
        .map(|i| ObjectTiming {
            path: if i == 0 {
                "/index.html".to_string()
            } else {
                format!("/img/s{i:02}.jpg")
            },
            connection: if i == 0 { 0 } else { (i % 6) as u64 },
            protocol: "http/1.1".to_string(),
            started_ms: if i == 0 { 0.0 } else { 250.0 },
            blocked_ms: if i < 6 { 0.0 } else { 80.0 },
            connect_ms: if i < 6 { 50.0 } else { 0.0 },
            tls_ms: if i < 6 { 50.0 } else { 0.0 },
            send_ms: 0.1,
            wait_ms: 50.0,
            receive_ms: 10.0 + f64::from(i) * 5.0,
            bytes: 2600,
            status: 200,
            mime: "image/jpeg".to_string(),
        })
        .collect()
}

#[test]
fn svg_is_written_without_any_font() {
    let options = WaterfallOptions {
        title: "carlucci-small over http/1.1".to_string(),
        ..WaterfallOptions::default()
    };
    let svg = svg_string(&objects(), &options).expect("drawn");
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg"),
        "{}",
        &svg[..100.min(svg.len())]
    );
    assert!(svg.contains("<rect"));
    assert!(svg.contains("carlucci-small over http/1.1"));
    assert!(svg.contains("/img/s11.jpg"));
    assert!(svg.contains("load 445 ms"), "the load line is labelled");
    // Empty input still draws a (blank) figure rather than failing.
    assert!(svg_string(&[], &options).expect("drawn").contains("<svg"));
}

#[test]
fn svg_and_png_files() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let svg = dir.join("waterfall.svg");
    let png = dir.join("waterfall.png");
    let _ = std::fs::remove_file(&png);
    let options = WaterfallOptions {
        title: "test".to_string(),
        page_load_ms: Some(500.0),
        ..WaterfallOptions::default()
    };
    let out = write_waterfall(&objects(), &options, &svg, Some(&png)).expect("written");
    assert!(std::fs::metadata(&svg).expect("svg").len() > 1000);
    if find_font(None).is_some() {
        assert_eq!(
            out.png.as_deref(),
            Some(png.as_path()),
            "note: {:?}",
            out.note
        );
        let bytes = std::fs::read(&png).expect("png");
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(bytes.len() > 1000);
    } else {
        assert!(out.png.is_none());
        assert!(out.note.is_some());
    }
    // SVG only when no PNG is asked for.
    let out = write_waterfall(&objects(), &options, &svg, None).expect("written");
    assert_eq!((out.png, out.note), (None, None));
    let err = write_waterfall(
        &objects(),
        &options,
        Path::new("/nonexistent-dir/w.svg"),
        None,
    )
    .expect_err("no dir");
    assert!(err.to_string().contains("/nonexistent-dir/w.svg"), "{err}");
}

#[test]
fn large_page_draws() {
    // carlucci-large has 218 rows: the figure grows in height, never fails.
    let many: Vec<ObjectTiming> = (0..218)
        .map(|i| ObjectTiming {
            path: format!("/img/{i:03}.jpg"),
            connection: (i % 6) as u64,
            protocol: "h2".to_string(),
            started_ms: f64::from(i),
            blocked_ms: 0.0,
            connect_ms: 0.0,
            tls_ms: 0.0,
            send_ms: 0.0,
            wait_ms: 1.0,
            receive_ms: 2.0,
            bytes: 1,
            status: 200,
            mime: "image/jpeg".to_string(),
        })
        .collect();
    let svg = svg_string(&many, &WaterfallOptions::default()).expect("drawn");
    assert!(svg.matches("<rect").count() > 218);
    assert!(!svg.contains("first 1000"));

    // Beyond MAX_ROWS the figure is capped and says so.
    let huge: Vec<ObjectTiming> = (0..1500)
        .map(|i| ObjectTiming {
            path: format!("/{i}"),
            ..many[0].clone()
        })
        .collect();
    let svg = svg_string(
        &huge,
        &WaterfallOptions {
            title: "huge".into(),
            ..WaterfallOptions::default()
        },
    )
    .expect("drawn");
    assert!(svg.contains("huge (first 1000 of 1500 objects by start time)"));
    assert!(svg.contains("/999") && !svg.contains("/1000\n"));
}
