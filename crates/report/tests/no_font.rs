//! SVG output must not depend on a font file. This is its own test binary
//! (own process) so no other test has registered a font with plotters.

mod common;

use common::*;
use quiclab_report::{ReportOptions, render_with_fonts};

#[test]
fn svg_only_without_font() {
    let dir = temp_dir("nofont");
    let out = render_with_fonts(&synthetic(), &ReportOptions::default(), &dir, &[]).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    let note = "PNG figures skipped: no font; apt-get install fonts-dejavu-core";
    assert_eq!(out.notes, [note]);
    assert!(html.contains(note));
    assert_eq!(svg_count(&html), 11);
    assert_eq!(out.figures.len(), 11);
    for f in &out.figures {
        assert_eq!(f.extension().unwrap(), "svg");
        assert!(std::fs::metadata(f).unwrap().len() > 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
