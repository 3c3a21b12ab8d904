//! Discovery on fixtures: HTML with img/link/script/style, CSS with every url() form, relative
//! paths, data: URIs and other origins ignored; page directories.

use std::path::{Path, PathBuf};

use quiclab_page::discover::{Via, discover_body, file_for_path, resolve};
use quiclab_page::{ObjectKind, Origin, PageError, discover_css, discover_html, load_dir};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).expect("fixture exists")
}

#[test]
fn html_fixture() {
    let refs = discover_html(&read("chain/index.html"), "/index.html", None);
    let got: Vec<(&str, ObjectKind, Via)> = refs
        .iter()
        .map(|r| (r.path.as_str(), r.kind, r.via))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/css/site.css", ObjectKind::Stylesheet, Via::LinkStylesheet),
            ("/js/app.js", ObjectKind::Script, Via::ScriptSrc),
            ("/img/hero.jpg", ObjectKind::Image, Via::CssUrl),
            ("/img/logo.png", ObjectKind::Image, Via::ImgSrc),
            ("/img/abs.gif", ObjectKind::Image, Via::ImgSrc),
            ("/img/dots.png", ObjectKind::Image, Via::ImgSrc),
            ("/img/with%20space.png", ObjectKind::Image, Via::ImgSrc),
            ("/img/div-bg.png", ObjectKind::Image, Via::CssUrl),
        ]
    );
}

#[test]
fn html_in_a_subdirectory_resolves_against_it() {
    let html = r#"<img src="a.png"><img src="../b.png"><img src="../../../c.png"><link rel="STYLESHEET alternate" href="s.css">"#;
    let paths: Vec<String> = discover_html(html, "/blog/2024/post.html", None)
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(
        paths,
        vec![
            "/blog/2024/a.png",
            "/blog/b.png",
            "/c.png",
            "/blog/2024/s.css"
        ]
    );
}

#[test]
fn base_href_changes_the_base() {
    let html = r#"<head><base href="/static/"></head><img src="x.png">"#;
    let paths: Vec<String> = discover_html(html, "/page/index.html", None)
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(paths, vec!["/static/x.png"]);
    // A base on another origin makes every relative reference foreign.
    let html = r#"<base href="https://cdn.example/"><img src="x.png">"#;
    assert!(discover_html(html, "/index.html", None).is_empty());
}

#[test]
fn css_fixture() {
    let refs = discover_css(&read("chain/css/site.css"), "/css/site.css", None);
    let got: Vec<(&str, ObjectKind, Via)> = refs
        .iter()
        .map(|r| (r.path.as_str(), r.kind, r.via))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/css/fonts.css", ObjectKind::Stylesheet, Via::CssImport),
            ("/img/bg.png", ObjectKind::Image, Via::CssUrl),
            ("/img/quoted-double.png", ObjectKind::Image, Via::CssUrl),
            ("/img/quoted-single.png", ObjectKind::Image, Via::CssUrl),
            ("/img/root.png", ObjectKind::Image, Via::CssUrl),
        ]
    );
    let fonts = discover_css(&read("chain/css/fonts.css"), "/css/fonts.css", None);
    assert_eq!(fonts.len(), 1);
    assert_eq!(
        (fonts[0].path.as_str(), fonts[0].kind),
        ("/fonts/lab.woff2", ObjectKind::Font)
    );
}

#[test]
fn css_url_forms() {
    let css = r#"
        a { b: url(plain.png) }
        a { b: url(  spaced.png  ) }
        a { b: url("dq.png") url('sq.png') }
        a { b: url(esc\(aped\).png) }
        a { b: url("\61 bc.png") }
        a { b: url(bad url.png) }
        a { b: url(bad"quote.png) }
        a { b: myurl(not-a-function.png) }
        @import url(imported.css) screen;
        @IMPORT 'imported2.css';
        a { b: url(blob:https://x/y) url(javascript:alert(1)) url(#fragment) url() }
        a { b: url(//other.example/z.png) url(http://other.example:8080/z.png) }
        /* unterminated comment url(c.png)
    "#;
    let refs = discover_css(css, "/s/site.css", None);
    let got: Vec<(&str, Via)> = refs.iter().map(|r| (r.path.as_str(), r.via)).collect();
    assert_eq!(
        got,
        vec![
            ("/s/plain.png", Via::CssUrl),
            ("/s/spaced.png", Via::CssUrl),
            ("/s/dq.png", Via::CssUrl),
            ("/s/sq.png", Via::CssUrl),
            ("/s/esc(aped).png", Via::CssUrl),
            ("/s/abc.png", Via::CssUrl),
            ("/s/imported.css", Via::CssImport),
            ("/s/imported2.css", Via::CssImport),
        ]
    );
    assert_eq!(refs[6].kind, ObjectKind::Stylesheet);
}

#[test]
fn same_origin_absolute_urls_are_followed() {
    let origin = Origin::parse("https://100.64.0.2").expect("valid");
    let html = r#"
        <img src="https://100.64.0.2/a.png">
        <img src="HTTPS://100.64.0.2:443/b.png?v=1#top">
        <img src="//100.64.0.2/c.png">
        <img src="http://100.64.0.2/d.png">
        <img src="https://100.64.0.2:8443/e.png">
        <img src="https://example.com/f.png">"#;
    let paths: Vec<String> = discover_html(html, "/index.html", Some(&origin))
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(paths, vec!["/a.png", "/b.png?v=1", "/c.png"]);
    assert_eq!(origin.url("/x"), "https://100.64.0.2/x");
    let v6 = Origin::parse("https://[FD00:71AB::2]:8443/").expect("valid");
    assert_eq!(v6.url("/"), "https://[fd00:71ab::2]:8443/");
    assert_eq!(
        resolve("/", "https://[fd00:71ab::2]:8443/q", Some(&v6)).as_deref(),
        Some("/q")
    );
    for bad in [
        "100.64.0.2",
        "ftp://host",
        "https://host/path",
        "https://",
        "https://host:port",
    ] {
        let err = Origin::parse(bad).expect_err(bad);
        assert!(err.to_string().contains(bad), "{err}");
    }
}

#[test]
fn resolution_edge_cases() {
    assert_eq!(
        resolve("/a/b.html", "c/./d/../e.png", None).as_deref(),
        Some("/a/c/e.png")
    );
    assert_eq!(resolve("/a/b.html", "..", None).as_deref(), Some("/"));
    assert_eq!(
        resolve("/a/b.html", "../../../../x", None).as_deref(),
        Some("/x")
    );
    assert_eq!(
        resolve("/a/b.html", "?q=1", None).as_deref(),
        Some("/a/b.html?q=1")
    );
    assert_eq!(
        resolve("/a/b.html", "  x.png\n", None).as_deref(),
        Some("/a/x.png")
    );
    assert_eq!(
        resolve("/a/b.html", "img\\win.png", None).as_deref(),
        Some("/a/img/win.png")
    );
    assert_eq!(
        resolve("/a/b.html", "é.png", None).as_deref(),
        Some("/a/%C3%A9.png")
    );
    assert_eq!(resolve("/a/b.html", "#x", None), None);
    assert_eq!(resolve("/a/b.html", "", None), None);
    assert_eq!(resolve("/a/b.html", "data:text/plain,hi", None), None);
    assert_eq!(resolve("/a/b.html", "mailto:a@b", None), None);
    assert_eq!(resolve("/a/b.html", "https://x/y", None), None);
}

#[test]
fn bodies_of_other_kinds_embed_nothing() {
    assert!(discover_body("/a.png", ObjectKind::Image, b"<img src=x.png>", None).is_empty());
    assert_eq!(
        discover_body("/a.css", ObjectKind::Stylesheet, b"a{b:url(x.png)}", None).len(),
        1
    );
    // Invalid UTF-8 does not stop discovery.
    assert_eq!(
        discover_body("/", ObjectKind::Html, b"<img src=x.png>\xff\xfe", None)[0].path,
        "/x.png"
    );
}

#[test]
fn load_dir_follows_the_chain() {
    let page = load_dir(&fixture("chain")).expect("loads");
    let got: Vec<(&str, Option<&str>)> = page
        .objects()
        .iter()
        .map(|o| (o.path.as_str(), o.referenced_by.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/index.html", None),
            ("/css/site.css", Some("/index.html")),
            ("/js/app.js", Some("/index.html")),
            ("/img/hero.jpg", Some("/index.html")),
            ("/img/logo.png", Some("/index.html")),
            ("/img/abs.gif", Some("/index.html")),
            ("/img/dots.png", Some("/index.html")),
            ("/img/with%20space.png", Some("/index.html")),
            ("/img/div-bg.png", Some("/index.html")),
            ("/css/fonts.css", Some("/css/site.css")),
            ("/img/bg.png", Some("/css/site.css")),
            ("/img/quoted-double.png", Some("/css/site.css")),
            ("/img/quoted-single.png", Some("/css/site.css")),
            ("/img/root.png", Some("/css/site.css")),
            ("/fonts/lab.woff2", Some("/css/fonts.css")),
        ]
    );
    for o in page.objects() {
        let file = file_for_path(page.root(), &o.path).expect("inside");
        assert_eq!(
            std::fs::metadata(&file).expect("exists").len(),
            o.size,
            "{}",
            o.path
        );
        assert_eq!(page.read(&o.path).expect("readable").len() as u64, o.size);
    }
    assert_eq!(page.objects()[1].content_type, "text/css; charset=utf-8");
    assert_eq!(page.objects()[14].kind, ObjectKind::Font);
}

#[test]
fn load_dir_errors_name_the_path() {
    let missing = fixture("chain/img");
    let err = load_dir(&missing).expect_err("no index.html");
    assert!(matches!(err, PageError::MissingIndex { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains(&missing.display().to_string()) && msg.contains("index.html"),
        "{msg}"
    );

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("discover-broken-page");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("css")).expect("dir");
    std::fs::write(
        dir.join("index.html"),
        r#"<link rel=stylesheet href="css/a.css">"#,
    )
    .expect("write");
    std::fs::write(
        dir.join("css/a.css"),
        "b { background: url(../img/gone.png) }",
    )
    .expect("write");
    let err = load_dir(&dir).expect_err("missing image");
    let msg = err.to_string();
    assert!(matches!(err, PageError::MissingObject { .. }));
    assert!(msg.contains("/css/a.css references /img/gone.png"), "{msg}");
    assert!(msg.contains("img/gone.png does not exist"), "{msg}");

    // An encoded `..` cannot leave the directory.
    std::fs::write(dir.join("index.html"), r#"<img src="%2e%2e/secret">"#).expect("write");
    let err = load_dir(&dir).expect_err("outside");
    assert!(matches!(err, PageError::OutsideDir { .. }), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn file_mapping() {
    let root = Path::new("/srv/page");
    assert_eq!(file_for_path(root, "/"), Some(root.join("index.html")));
    assert_eq!(file_for_path(root, "/a/"), Some(root.join("a/index.html")));
    assert_eq!(
        file_for_path(root, "/img/a%20b.png?v=2"),
        Some(root.join("img/a b.png"))
    );
    assert_eq!(file_for_path(root, "/%2e%2e/etc/passwd"), None);
    assert_eq!(file_for_path(root, "/a%2Fb"), None);
}
