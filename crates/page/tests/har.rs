//! HAR 1.2: a log built from fake timings validates and round-trips; broken logs yield specific
//! messages.

use std::time::{Duration, UNIX_EPOCH};

use quiclab_page::har::{Har, HarPage, ObjectTiming, build_har, page_load_ms, validate};
use serde_json::{Value, json};

fn timing(
    path: &str,
    conn: u64,
    started: f64,
    connect: f64,
    tls: f64,
    mime: &str,
    bytes: u64,
) -> ObjectTiming {
    ObjectTiming {
        path: path.to_string(),
        connection: conn,
        protocol: "http/1.1".to_string(),
        started_ms: started,
        blocked_ms: 1.5,
        connect_ms: connect,
        tls_ms: tls,
        send_ms: 0.25,
        wait_ms: 50.0,
        receive_ms: 12.125,
        bytes,
        status: 200,
        mime: mime.to_string(),
    }
}

fn fake() -> (HarPage, Vec<ObjectTiming>) {
    let page = HarPage {
        title: "carlucci-small over http/1.1".to_string(),
        origin: "https://100.64.0.2/".to_string(),
        navigation_start: UNIX_EPOCH + Duration::from_millis(1_714_564_800_000),
        page_load_ms: None,
        content_load_ms: Some(163.875),
        server_ip: Some("100.64.0.2".to_string()),
        comment: Some("3 Mbit/s, 50 ms".to_string()),
    };
    let objects = vec![
        timing(
            "/index.html",
            0,
            0.0,
            50.0,
            50.0,
            "text/html; charset=utf-8",
            987,
        ),
        // Listed out of start order on purpose: the builder sorts.
        timing(
            "/img/s02.jpg?v=1&x",
            1,
            170.0,
            50.0,
            50.0,
            "image/jpeg",
            2600,
        ),
        timing("/img/s01.jpg", 0, 165.0, 0.0, 0.0, "image/jpeg", 2600),
    ];
    (page, objects)
}

#[test]
fn built_har_validates_and_round_trips() {
    let (page, objects) = fake();
    let har = build_har(&page, &objects);
    let json = har.to_json().expect("serialises");
    assert_eq!(validate(&json), Ok(()));
    assert_eq!(Har::from_json(&json).expect("parses"), har);

    let v: Value = serde_json::from_str(&json).expect("json");
    let log = &v["log"];
    assert_eq!(log["version"], "1.2");
    assert_eq!(log["creator"]["name"], "quiclab");
    assert_eq!(log["comment"], "3 Mbit/s, 50 ms");
    assert_eq!(
        log["pages"][0]["startedDateTime"],
        "2024-05-01T12:00:00.000Z"
    );
    assert_eq!(log["pages"][0]["id"], "page_1");
    // onLoad = the latest end: 170 + 1.5 + 100 + 0.25 + 50 + 12.125.
    assert_eq!(log["pages"][0]["pageTimings"]["onLoad"], 333.875);
    assert_eq!(log["pages"][0]["pageTimings"]["onContentLoad"], 163.875);
    assert_eq!(page_load_ms(&objects), 333.875);

    let entries = log["entries"].as_array().expect("entries");
    let urls: Vec<&str> = entries
        .iter()
        .map(|e| e["request"]["url"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        urls,
        vec![
            "https://100.64.0.2/index.html",
            "https://100.64.0.2/img/s01.jpg",
            "https://100.64.0.2/img/s02.jpg?v=1&x"
        ]
    );
    // A new connection: connect includes ssl.
    let first = &entries[0];
    assert_eq!(first["timings"]["connect"], 100.0);
    assert_eq!(first["timings"]["ssl"], 50.0);
    assert_eq!(first["timings"]["dns"], -1.0);
    assert_eq!(first["time"], 163.875);
    assert_eq!(first["connection"], "0");
    assert_eq!(first["_resourceType"], "document");
    assert_eq!(first["serverIPAddress"], "100.64.0.2");
    assert_eq!(first["pageref"], "page_1");
    assert_eq!(first["response"]["content"]["size"], 987);
    assert_eq!(first["response"]["statusText"], "OK");
    // A reused connection: no connect, no ssl.
    let reused = &entries[1];
    assert_eq!(reused["timings"]["connect"], -1.0);
    assert_eq!(reused["timings"]["ssl"], -1.0);
    assert_eq!(reused["time"], 63.875);
    assert_eq!(reused["startedDateTime"], "2024-05-01T12:00:00.165Z");
    assert_eq!(reused["_resourceType"], "image");
    assert_eq!(
        entries[2]["request"]["queryString"],
        json!([{"name": "v", "value": "1"}, {"name": "x", "value": ""}])
    );
    assert_eq!(entries[2]["cache"], json!({}));
}

#[test]
fn har_file_is_written() {
    let (page, objects) = fake();
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("page.har");
    build_har(&page, &objects).write_to(&path).expect("written");
    let text = std::fs::read_to_string(&path).expect("readable");
    assert_eq!(validate(&text), Ok(()));
    let err = build_har(&page, &objects)
        .write_to(std::path::Path::new("/nonexistent-dir/x.har"))
        .expect_err("no such dir");
    assert!(err.to_string().contains("/nonexistent-dir/x.har"), "{err}");
}

fn broken(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let (page, objects) = fake();
    let mut v = serde_json::to_value(build_har(&page, &objects)).expect("value");
    edit(&mut v);
    validate(&v.to_string()).expect_err("broken")
}

fn assert_has(errors: &[String], needle: &str) {
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "no error containing `{needle}` in {errors:#?}"
    );
}

#[test]
fn broken_hars_yield_specific_messages() {
    let errors = broken(|v| {
        let log = v["log"].as_object_mut().expect("log");
        log.insert("version".into(), json!("1.1"));
        log["creator"]
            .as_object_mut()
            .expect("creator")
            .remove("version");
        let e0 = &mut log["entries"][0];
        e0["timings"]["send"] = json!(-1);
        e0["request"]["url"] = json!("/index.html");
        e0["startedDateTime"] = json!("yesterday");
        let e1 = &mut log["entries"][1];
        e1["time"] = json!(1000.0);
        e1["pageref"] = json!("page_9");
        e1["response"]
            .as_object_mut()
            .expect("response")
            .remove("content");
        e1["request"]["headers"] = json!([{"name": "a"}]);
        let e2 = &mut log["entries"][2];
        e2["timings"]["ssl"] = json!(500.0);
        e2["timings"]["blocked"] = json!(-2);
        e2["response"]["status"] = json!("200");
        e2.as_object_mut().expect("entry").remove("cache");
        log["pages"][0]["pageTimings"]["onLoad"] = json!("soon");
    });
    assert_has(&errors, "log.version: expected \"1.2\", found \"1.1\"");
    assert_has(&errors, "log.creator.version: missing (required string)");
    assert_has(&errors, "log.entries[0].timings.send: must be ≥ 0");
    assert_has(
        &errors,
        "log.entries[0].request.url: `/index.html` is not an absolute URL",
    );
    assert_has(
        &errors,
        "log.entries[0].startedDateTime: `yesterday` is not an ISO 8601 date-time",
    );
    assert_has(&errors, "log.entries[1].timings: entry time 1000 ≠ 63.875");
    assert_has(&errors, "log.entries[1].pageref: `page_9` names no page");
    assert_has(
        &errors,
        "log.entries[1].response.content: missing (required object)",
    );
    assert_has(
        &errors,
        "log.entries[1].request.headers[0].value: missing (required string)",
    );
    assert_has(
        &errors,
        "log.entries[2].timings.ssl: ssl 500 must be included in connect",
    );
    assert_has(
        &errors,
        "log.entries[2].timings.blocked: must be -1 (not applicable) or ≥ 0, found -2",
    );
    assert_has(
        &errors,
        "log.entries[2].response.status: expected number, found string",
    );
    assert_has(&errors, "log.entries[2].cache: missing (required object)");
    assert_has(
        &errors,
        "log.pages[0].pageTimings.onLoad: expected number, found string",
    );
    assert_eq!(errors.len(), 15, "{errors:#?}");
}

#[test]
fn structural_errors() {
    assert_has(&validate("{").expect_err("not json"), "not JSON");
    assert_has(
        &validate("[]").expect_err("array"),
        "$: expected object, found array",
    );
    assert_has(
        &validate("{}").expect_err("no log"),
        "$.log: missing (required object)",
    );
    let errors =
        validate(r#"{"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}}}"#)
            .expect_err("no entries");
    assert_eq!(
        errors,
        vec!["log.entries: missing (required array)".to_string()]
    );
    // The smallest valid HAR: no pages, no entries.
    assert_eq!(
        validate(
            r#"{"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": []}}"#
        ),
        Ok(())
    );
    let errors = broken(
        |v| v["log"]["pages"] = json!([{"id": "page_1"}, {"id": "page_1", "title": "t", "startedDateTime": "2024-05-01T12:00:00Z", "pageTimings": {}}]),
    );
    assert_has(&errors, "log.pages[0].startedDateTime: missing");
    assert_has(&errors, "log.pages[1].id: duplicate page id `page_1`");
}
