//! Unit tests of the rules, the line parsers, the batch and the query merge.

use super::*;

const RULES: &str = r#"
[feed.v1]
format = "csv"
columns = ["ts", "campaign", "user", "state", "event", "cost"]
time = { field = "ts", unit = "s" }

[feed.v2]
format = "jsonl"
time = { path = "$.time", unit = "ms" }
fields = { campaign = "$.ad.campaign", user = "$.user.id", sku = "$.items[*].sku" }

[[summary]]
name = "by_campaign"
feed = "v1"
where = "event = 'click'"
dimensions = ["campaign", "state"]
bucket = "1d"
metrics = { clicks = "count", spend = "sum(cost)", users = "hll(user)", exact_users = "distinct(user)", low = "min(cost)", high = "max(cost)", latest = "last(user)" }
ttl = "90d"

[[summary]]
name = "all_events"
feed = "v1"
metrics = { n = "count" }

[[summary]]
name = "sku"
feed = "v2"
dimensions = ["sku"]
bucket = "none"
metrics = { n = "count", users = "distinct(user)" }
"#;

fn rules() -> Rules {
    Rules::parse(RULES).expect("valid rules")
}

fn err_of(text: &str) -> RulesError {
    Rules::parse(text).expect_err("refused")
}

#[test]
fn parses_the_example() {
    let r = rules();
    assert_eq!(r.feeds.len(), 2);
    assert_eq!(r.summaries.len(), 3);
    let s = &r.summaries[0];
    assert_eq!(s.dim_names, vec!["campaign", "state"]);
    assert_eq!(s.bucket, Bucket::Day);
    assert_eq!(s.ttl_ms, Some(90 * 86_400_000));
    assert_eq!(s.metrics.len(), 7);
    let v1 = &r.feeds[r.feed("v1").unwrap()];
    assert_eq!(v1.summaries, vec![0, 1]);
    assert!(v1.numeric[5], "cost is summed");
    assert!(!v1.numeric[2]);
}

#[test]
fn errors_name_the_line_and_reason() {
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"b\"\nmetrics = { n = \"count\" }\n");
    assert_eq!(e.line, 7, "{e}");
    assert!(e.message.contains("unknown feed 'b'"), "{e}");
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"a\"\nmetrics = { n = \"sum(q)\" }\n");
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("'q' is not a field"), "{e}");
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"a\"\nwhere = \"t = \"\nmetrics = { n = \"count\" }\n");
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("where"), "{e}");
    // TOML syntax: the parser's own position.
    let e = err_of("[feed.a]\nformat = \"csv\n");
    assert_eq!(e.line, 2, "{e}");
    // Unknown keys are refused, not ignored.
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"a\"\ndimension = [\"t\"]\nmetrics = { n = \"count\" }\n");
    assert!(e.message.contains("dimension"), "{e}");
    assert!(e.line >= 5, "{e}");
    let e = err_of("[feed.a]\nformat = \"xml\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n");
    assert_eq!(e.line, 2, "{e}");
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"a\"\nbucket = \"2d\"\nmetrics = { n = \"count\" }\n");
    assert_eq!(e.line, 8, "{e}");
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n");
    assert!(e.message.contains("no [[summary]]"), "{e}");
    let e = err_of("[feed.a]\nformat = \"csv\"\ncolumns = [\"t\"]\ntime = { field = \"t\", unit = \"s\" }\n[[summary]]\nname = \"x\"\nfeed = \"a\"\nttl = \"ninety\"\nmetrics = { n = \"count\" }\n");
    assert_eq!(e.line, 8, "{e}");
}

#[test]
fn filters() {
    let fields = ["event", "cost", "state"];
    let resolve = |n: &str| fields.iter().position(|f| *f == n);
    let check = |text: &str, vals: [&str; 3]| Expr::parse(text, resolve).unwrap().eval(&|f: usize| vals[f]);
    assert!(check("event = 'click'", ["click", "1", "CA"]));
    assert!(!check("event = 'click'", ["view", "1", "CA"]));
    assert!(check("event != 'click'", ["view", "1", "CA"]));
    assert!(check("cost > 5 and cost < 10", ["x", "7.5", "CA"]));
    assert!(!check("cost > 5 and cost < 10", ["x", "10", "CA"]));
    assert!(check("cost >= 10", ["x", "10", "CA"]));
    // A non-number never equals, nor orders against, a number.
    assert!(!check("cost > 5", ["x", "abc", "CA"]));
    assert!(check("cost != 5", ["x", "abc", "CA"]));
    assert!(check("state in ('NY', 'CA')", ["x", "1", "CA"]));
    assert!(!check("state in ('NY', 'TX')", ["x", "1", "CA"]));
    assert!(check("not state in ('NY') and (event = 'a' or event = 'click')", ["click", "1", "CA"]));
    assert!(check("event = 'it''s'", ["it's", "1", "CA"]));
    // Precedence: and binds tighter than or.
    assert!(check("event = 'a' or event = 'click' and cost > 100", ["a", "1", "CA"]));
    assert!(!check("(event = 'a' or event = 'click') and cost > 100", ["a", "1", "CA"]));
    for bad in ["", "event =", "nosuch = 1", "event = 'x", "event 'x'", "(event = 'x'", "event = 'x' junk", "state in ()", "cost = 1e999"] {
        assert!(Expr::parse(bad, resolve).is_err(), "{bad}");
    }
    let deep = format!("{}event = 'x'{}", "(".repeat(100), ")".repeat(100));
    assert!(Expr::parse(&deep, resolve).is_err());
}

#[test]
fn csv_splitting() {
    let mut out = Vec::new();
    split_csv("a,\"b,c\",\"d\"\"e\",", &mut out).unwrap();
    assert_eq!(out, vec!["a", "b,c", "d\"e", ""]);
    split_csv("", &mut out).unwrap();
    assert_eq!(out, vec![""]);
    for bad in ["a,\"b", "a,b\"c", "\"a\"b,c"] {
        let e = split_csv(bad, &mut out).unwrap_err();
        assert!(e.0.contains("bad CSV quoting"), "{bad}: {e}");
    }
}

/// `split_csv_spans` (the parser's) as strings, the line copied in first as the parser does.
/// With fewer slots than fields, the fields past them are counted and shown as "?".
fn split_spans(line: &str, slots: usize) -> Result<Vec<String>, LineError> {
    let mut text = line.to_string();
    let mut out = vec![vec![(0, 0)]; slots];
    let n = crate::event::split_csv_spans(line, &mut text, &mut out)?;
    let mut all: Vec<String> = out.iter().take(n).map(|v| text[v[0].0..v[0].1].to_string()).collect();
    all.extend(std::iter::repeat_n("?".to_string(), n.saturating_sub(slots)));
    Ok(all)
}

#[test]
fn csv_spans_split_as_strings_do() {
    let cases: [(&str, &[&str]); 7] = [
        ("a,\"b,c\",\"d\"\"e\",", &["a", "b,c", "d\"e", ""]),
        ("", &[""]),
        (",", &["", ""]),
        ("\"\"", &[""]),
        ("\"\"\"\"", &["\""]),
        ("\"é\"\"ü\"\"\",x", &["é\"ü\"", "x"]),
        ("\"\",,\"q\"", &["", "", "q"]),
    ];
    for (line, want) in cases {
        assert_eq!(split_spans(line, 8).unwrap(), want, "{line}");
    }
    for bad in ["a,\"b", "a,b\"c", "\"a\"b,c", "\"", "x,\"a\"\""] {
        assert!(split_spans(bad, 8).unwrap_err().0.contains("bad CSV quoting"), "{bad}");
    }
}

proptest::proptest! {
    /// The span splitter against the string splitter it replaced, on lines of commas,
    /// quotes and text: the same fields, or the same error.
    #[test]
    fn csv_spans_agree_with_split_csv(parts in proptest::collection::vec(proptest::sample::select(vec!["a", "bc", "defghijkl", ",", "\"", "\"\"", "é", " ", ""]), 0..24)) {
        let line: String = parts.concat();
        let mut old = Vec::new();
        let want = split_csv(&line, &mut old).map(|()| old.clone());
        proptest::prop_assert_eq!(split_spans(&line, 16).map_err(|e| e.0), want.clone().map_err(|e| e.0), "{}", line);
        // With three slots: the same count and first fields.
        let first3 = |v: Vec<String>| (v.len(), v.into_iter().take(3).collect::<Vec<_>>());
        proptest::prop_assert_eq!(split_spans(&line, 3).map(first3).map_err(|e| e.0), want.map(first3).map_err(|e| e.0), "{}", line);
    }
}

/// What `hll_hash` took for an integer before `canonical_i64`: `str::parse` and a check
/// that the text is written as the integer prints.
fn canonical_i64_reference(v: &str) -> Option<i64> {
    let n = v.parse::<i64>().ok()?;
    let digits = v.strip_prefix('-').unwrap_or(v);
    let canonical = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" && !v.starts_with('-') || !digits.starts_with('0'));
    canonical.then_some(n)
}

#[test]
fn canonical_integers() {
    let ok = ["0", "7", "-7", "9223372036854775807", "-9223372036854775808", "783739492924538956"];
    let text = ["", "-", "-0", "+7", "007", "00", "1234567/", "12345678/", "1234:5678", "123456789012345678a", "9999999999999999999", "9223372036854775808", "-9223372036854775809", "99999999999999999999", "1.0", " 7", "7 ", "1e3", "0x10", "１"];
    for v in ok {
        assert_eq!(crate::batch::canonical_i64(v.as_bytes()), Some(v.parse().unwrap()), "{v}");
    }
    for v in text {
        assert_eq!(crate::batch::canonical_i64(v.as_bytes()), None, "{v}");
    }
}

proptest::proptest! {
    #[test]
    fn canonical_i64_agrees_with_parse(v in "[-+]?[0-9]{0,21}", w in "-?[1-9]{0,9}[0-9/:a ]?[0-9]{0,9}", n in proptest::num::i64::ANY) {
        proptest::prop_assert_eq!(crate::batch::canonical_i64(v.as_bytes()), canonical_i64_reference(&v), "{}", v);
        // A non-digit anywhere in an eight-digit chunk or the rest.
        proptest::prop_assert_eq!(crate::batch::canonical_i64(w.as_bytes()), canonical_i64_reference(&w), "{}", w);
        let t = n.to_string();
        proptest::prop_assert_eq!(crate::batch::canonical_i64(t.as_bytes()), Some(n));
    }

    #[test]
    fn digits_u64_is_parse(v in "[0-9]{0,21}|[0-9]{0,9}[^0-9]?[0-9]{0,9}") {
        let want = (v.len() <= 19 && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())).then(|| v.parse::<u64>().ok()).flatten();
        proptest::prop_assert_eq!(crate::batch::digits_u64(v.as_bytes()), want, "{}", v);
    }

    #[test]
    fn lines_split_as_split_does(payload in "[a\n\r]{0,20}") {
        let got: Vec<&[u8]> = crate::batch::lines(payload.as_bytes()).collect();
        let want: Vec<&[u8]> = payload.as_bytes().split(|&b| b == b'\n').collect();
        proptest::prop_assert_eq!(got, want);
    }
}

proptest::proptest! {
    #[test]
    fn trim_is_str_trim(s in "[ \t\n\x0ba-z0-9.\u{a0}\u{2003}é-]{0,8}") {
        proptest::prop_assert_eq!(crate::event::trim(&s), s.trim());
    }
}

fn reasons(r: &Rules, feed: &str, payload: &str) -> Vec<String> {
    let mut b = Batch::new(r, r.feed(feed).unwrap());
    b.add_payload(r, payload.as_bytes(), 1, 100);
    b.rejects.iter().map(|x| x.reason.clone()).collect()
}

#[test]
fn bad_lines_are_rejected_alone_with_a_reason() {
    let r = rules();
    let cases = [
        ("1700000000,c1,\"u1,CA,click,1", "bad CSV quoting"),
        ("1700000000,c1,u1,CA,click", "missing field"),
        ("1700000000,c1,u1,CA,click,1,9", "extra field"),
        ("1700000000,c1,u1,CA,click,abc", "wrong type"),
        ("yesterday,c1,u1,CA,click,1", "bad time"),
        ("-5,c1,u1,CA,click,1", "out of range"),
    ];
    for (line, want) in cases {
        let got = reasons(&r, "v1", line);
        assert_eq!(got.len(), 1, "{line}");
        assert!(got[0].contains(want), "{line}: {got:?}");
    }
    let cases = [
        ("{\"time\": 1, \"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 5}, \"items\": [", "invalid JSON"),
        ("[1,2]", "must be an object"),
        ("{\"time\": 1, \"ad\": {}, \"user\": {\"id\": 5}, \"items\": []}", "missing field: campaign"),
        ("{\"time\": 1, \"ad\": {\"campaign\": {\"x\": 1}}, \"user\": {\"id\": 5}, \"items\": []}", "wrong type"),
        ("{\"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 5}, \"items\": []}", "missing field: time"),
        ("{\"time\": \"noon\", \"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 5}, \"items\": []}", "bad time"),
    ];
    for (line, want) in cases {
        let got = reasons(&r, "v2", line);
        assert_eq!(got.len(), 1, "{line}");
        assert!(got[0].contains(want), "{line}: {got:?}");
    }
    // Good lines around a bad one are applied; the line number is the bad one's.
    let mut b = Batch::new(&r, 0);
    let next = b.add_payload(&r, b"1700000000,c1,u1,CA,click,1\n1700000000,c1,\"u1\n\r\n1700000000,c1,u2,CA,view,2\n", 10, 100);
    assert_eq!(next, 14);
    assert_eq!((b.events, b.rejected), (2, 1));
    assert_eq!(b.rejects[0].line_no, 11);
    // Oversized lines.
    let long = format!("1700000000,{},u1,CA,click,1", "c".repeat(70_000));
    assert!(reasons(&r, "v1", &long)[0].contains("longer than"));
    // Only the first ones are kept, all are counted.
    let mut b = Batch::new(&r, 0);
    b.add_payload(&r, "x\n".repeat(50).as_bytes(), 1, 5);
    assert_eq!((b.rejected, b.rejects.len()), (50, 5));
}

fn commands(r: &Rules, feed: &str, payload: &str) -> Vec<String> {
    let mut b = Batch::new(r, r.feed(feed).unwrap());
    b.add_payload(r, payload.as_bytes(), 1, 100);
    assert_eq!(b.rejected, 0, "{:?}", b.rejects);
    let mut v: Vec<String> = b.commands(r, 1000).into_iter().map(|c| c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")).collect();
    v.sort();
    v
}

#[test]
fn a_batch_aggregates_per_key() {
    let r = rules();
    let day = 1_700_000_000 / 86400 * 86400;
    let got = commands(&r, "v1", "ts,campaign,user,state,event,cost\n1700000000,c1,7,CA,click,1.5\n1700000100,c1,8,CA,click,2\n1700000200,c1,9,CA,view,100\n1700000300,\"c:2\",7,NY,click,3\n");
    let exp_day: i64 = (day as i64 + 86400) * 1000 + 90 * 86_400_000;
    assert!(got.contains(&"SUMMARY.UPDATE all_events n INCRBY 4".to_string()), "{got:?}");
    let h = got.iter().find(|c| c.starts_with(&format!("SUMMARY.UPDATE by_campaign:c1:CA:{day} "))).expect("the c1 hash");
    // Metrics in name order: clicks, exact_users (not a hash field), high, latest, low, spend, users.
    assert_eq!(h, &format!("SUMMARY.UPDATE by_campaign:c1:CA:{day} clicks INCRBY 2 high MAX 2 latest SET 8 low MIN 1.5 spend INCRBYDECIMAL 3.5"));
    assert!(got.contains(&format!("SADD by_campaign:c1:CA:{day}:exact_users 7 8")), "{got:?}");
    assert!(got.contains(&format!("SADD by_campaign:c%3A2:NY:{day}:exact_users 7")), "{got:?}");
    assert!(got.contains(&format!("PEXPIREAT by_campaign:c1:CA:{day} {exp_day}")), "{got:?}");
    let hll = got.iter().find(|c| c.starts_with(&format!("HLL.ADDRAW by_campaign:c1:CA:{day}:users "))).unwrap();
    assert_eq!(hll, &format!("HLL.ADDRAW by_campaign:c1:CA:{day}:users {} {}", abacus_hll::hash_bigint(7, 0), abacus_hll::hash_bigint(8, 0)));
}

#[test]
fn fan_out_updates_once_per_value() {
    let r = rules();
    let got = commands(&r, "v2", "{\"time\": 1700000000000, \"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 5}, \"items\": [{\"sku\": \"a\"}, {\"sku\": \"b\"}, {\"sku\": \"a\"}]}\n{\"time\": 1700000000000, \"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 6}, \"items\": []}\n");
    assert!(got.contains(&"SUMMARY.UPDATE sku:a n INCRBY 2".to_string()), "{got:?}");
    assert!(got.contains(&"SUMMARY.UPDATE sku:b n INCRBY 1".to_string()), "{got:?}");
    assert!(got.contains(&"SADD sku:a:users 5 5".to_string()), "{got:?}");
    assert_eq!(got.len(), 4, "{got:?}");
}

#[test]
fn keys_split_back() {
    let r = rules();
    let s = &r.summaries[0];
    let k = summary_key(s, ["a:b%c", ""].into_iter(), Some(86400));
    assert_eq!(k, "by_campaign:a%3Ab%25c::86400");
    let p = parse_key(s, k.as_bytes()).unwrap();
    assert_eq!(p, KeyParts { dims: vec!["a:b%c".into(), "".into()], bucket: Some(86400), metric: None });
    let p = parse_key(s, format!("{k}:users").as_bytes()).unwrap();
    assert_eq!(p.metric.as_deref(), Some("users"));
    // A hash metric's name is no key suffix; other summaries' keys and junk are not ours.
    assert!(parse_key(s, format!("{k}:clicks").as_bytes()).is_none());
    assert!(parse_key(s, b"by_campaign:a:b").is_none());
    assert!(parse_key(s, b"by_campaignx:a:b:1").is_none());
    assert!(parse_key(s, b"by_campaign:a:b:notanumber").is_none());
    let all = &r.summaries[1];
    assert_eq!(parse_key(all, b"all_events").unwrap().dims.len(), 0);
}

#[test]
fn queries_merge_groups() {
    let r = rules();
    let s = &r.summaries[0];
    let args: Vec<&[u8]> = vec![b"by_campaign", b"FROM", b"0", b"TO", b"200000", b"GROUPBY", b"campaign"];
    let q = Query::parse(&r, &args).unwrap();
    let parts = |c: &str, st: &str, b: i64| KeyParts { dims: vec![c.into(), st.into()], bucket: Some(b), metric: None };
    assert_eq!(q.group_of(s, &parts("c1", "CA", 86400)), Some(vec!["c1".to_string()]));
    assert_eq!(q.group_of(s, &parts("c1", "CA", 200000)), None, "TO is exclusive");
    let mut a = Group::new(s, vec!["c1".into()]);
    let mut b = Group::new(s, vec!["c1".into()]);
    let clicks = s.metric("clicks").unwrap();
    let latest = s.metric("latest").unwrap();
    a.add_field(s, clicks, b"3", Some(0));
    b.add_field(s, clicks, b"4", Some(86400));
    a.add_field(s, latest, b"old", Some(0));
    b.add_field(s, latest, b"new", Some(86400));
    let users = s.metric("exact_users").unwrap();
    a.add_members(users, [b"1".to_vec(), b"2".to_vec()].into_iter());
    b.add_members(users, [b"2".to_vec(), b"3".to_vec()].into_iter());
    a.merge(s, b).unwrap();
    let cells = a.cells(s);
    assert!(cells.contains(&("clicks".into(), Cell::Int(7))));
    assert!(cells.contains(&("latest".into(), Cell::Text("new".into()))));
    assert!(cells.contains(&("exact_users".into(), Cell::Int(3))));
    for bad in [&[b"nosuch" as &[u8]][..], &[b"by_campaign", b"GROUPBY"], &[b"by_campaign", b"WHERE", b"nodim", b"x"], &[b"by_campaign", b"FROM", b"x"], &[b"by_campaign", b"junk"]] {
        assert!(Query::parse(&r, bad).is_err());
    }
}

#[test]
fn stream_rule_appends_each_update_in_event_order() {
    let text = format!("{RULES}\n[[summary]]\nname = \"trail\"\nfeed = \"v2\"\nwhere = \"campaign != 'skip'\"\nstream = {{ key = \"u:{{user}}:{{campaign}}\", fields = [\"sku\", \"campaign\"], maxlen = 10 }}\n");
    let r = Rules::parse(&text).expect("valid");
    let si = r.summary("trail").unwrap();
    let st = r.summaries[si].stream.as_ref().unwrap();
    assert_eq!(st.maxlen, Some(10));
    assert_eq!(st.field_names, vec!["sku".to_string(), "campaign".to_string()]);
    let mut b = Batch::new(&r, r.feed("v2").unwrap());
    let lines = "{\"time\": 2000, \"ad\": {\"campaign\": \"c\"}, \"user\": {\"id\": 5}, \"items\": [{\"sku\": \"a\"}, {\"sku\": \"b\"}]}\n\
                 {\"time\": 1000, \"ad\": {\"campaign\": \"skip\"}, \"user\": {\"id\": 5}, \"items\": [{\"sku\": \"a\"}]}\n\
                 {\"time\": 1000, \"ad\": {\"campaign\": \"d\"}, \"user\": {\"id\": 6}, \"items\": [{\"sku\": \"z\"}]}\n";
    b.add_payload(&r, lines.as_bytes(), 1, 10);
    let got: Vec<(String, i64, Vec<String>)> = b.streams.iter().map(|x| (x.key.clone(), x.time_ms, x.values.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("u:5:c".to_string(), 2000, vec!["a".to_string(), "c".to_string()]),
            ("u:5:c".to_string(), 2000, vec!["b".to_string(), "c".to_string()]),
            ("u:6:d".to_string(), 1000, vec!["z".to_string(), "d".to_string()]),
        ]
    );
    assert!(!b.is_empty());
    // A stream-only summary needs no metrics; one with neither is refused.
    let e = err_of(&text.replace("stream = { key = \"u:{user}:{campaign}\", fields = [\"sku\", \"campaign\"], maxlen = 10 }", ""));
    assert!(e.message.contains("needs `metrics"), "{e}");
    let e = err_of(&text.replace("{campaign}\"", "{campaign\""));
    assert!(e.message.contains("without"), "{e}");
}

const FEED_HEAD: &str = "[feed.a]\nformat = \"csv\"\ncolumns = [\"t\", \"u\"]\n";

#[test]
fn time_formats_when_full_and_hll_options() {
    let ok = |time: &str, extra: &str, metrics: &str| Rules::parse(&format!("{FEED_HEAD}time = {time}\n{extra}[[summary]]\nname = \"x\"\nfeed = \"a\"\nmetrics = {metrics}\n"));
    let r = ok("{ field = \"t\", format = \"%Y-%m-%dT%H:%M:%S%z\" }", "when_full = \"drop\"\n", "{ h = \"hll(u, log2m=12, regwidth=4, expthresh=0, sparseon=0)\", g = \"hll(u)\" }").unwrap();
    assert!(r.feeds[0].drop_when_full && r.feeds[0].time_format.is_some());
    assert_eq!(r.summaries[0].metrics[1].hll, HllOptions { log2m: Some(12), regwidth: Some(4), expthresh: Some(0), sparseon: Some(false) });
    assert!(r.summaries[0].metrics[0].hll.is_default());
    let ev = parse_line(&r.feeds[0], "2023-11-14T23:13:20+01:00,7").unwrap().unwrap();
    assert_eq!(ev.time_ms, 1_700_000_000_000);
    let e = parse_line(&r.feeds[0], "2023-11-31T00:00:00Z,7").unwrap_err();
    assert!(e.0.contains("bad time"), "{e}");
    // Errors, each on its line (4: time, 5: when_full, 9: metrics).
    let e = ok("{ field = \"t\", format = \"%Y\", unit = \"s\" }", "", "{ n = \"count\" }").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    let e = ok("{ field = \"t\", format = \"%H:%M\" }", "", "{ n = \"count\" }").unwrap_err();
    assert!(e.line == 4 && e.message.contains("names no date"), "{e}");
    let e = ok("{ field = \"t\", unit = \"s\" }", "when_full = \"block\"\n", "{ n = \"count\" }").unwrap_err();
    assert!(e.line == 5 && e.message.contains("\"drop\""), "{e}");
    for bad in ["hll(u, log2m=3)", "hll(u, regwidth=9)", "hll(u, expthresh=3)", "hll(u, sparseon=2)", "hll(u, log2m=12, log2m=13)", "hll(u, size=1)", "hll(u, log2m)", "sum(u, log2m=12)"] {
        let e = ok("{ field = \"t\", unit = \"s\" }", "", &format!("{{ h = \"{bad}\" }}")).unwrap_err();
        assert_eq!(e.line, 8, "{bad}: {e}");
    }
}

/// `json.rs`'s scanner against serde_json's document (`parse_json_dom`) on lines it must
/// accept with the same values and lines it must leave to serde_json: whatever it accepts
/// equals the document's values; what serde_json refuses it never accepts.
#[test]
fn json_scanner_agrees_with_serde_json() {
    let r = Rules::parse(
        r#"
[feed.j]
format = "jsonl"
time = { path = "$.t", unit = "ms" }
fields = { a = "$.a", b = "$.x.b", s = "$.items[*].sku", first = "$.items[0].sku", n = "$.n", k = "$[\"we ird\"]" }
[[summary]]
name = "j"
feed = "j"
metrics = { c = "count" }
"#,
    )
    .expect("valid rules");
    let feed = &r.feeds[0];
    let crate::TimeSource::Path(tp) = &feed.time else { panic!("a path") };
    let rest = r#""x":{"b":true},"items":[{"sku":"s1"},{"sku":2}],"n":1,"we ird":"w""#;
    let accepted = [
        format!(r#"{{"t":1700000000000,"a":"plain",{rest}}}"#),
        format!(r#" {{ "t" : "1700000000000" , "a" : 18446744073709551615 , {rest} }} "#),
        format!(r#"{{"t":1,"a":-5,{rest},"skip":[1,{{"q":[null,false,-0.5e-3]}}],"z":"\u00e9\n"}}"#),
        format!(r#"{{"t":1,"a":"é ü \" \\ \u0041",{rest}}}"#),
        format!(r#"{{"t":1.5,"a":8.22,{rest}}}"#),
        format!(r#"{{"t":1,"a":8.0,{rest}}}"#),
        format!(r#"{{"t":1,"a":1e2,{rest}}}"#),
        format!(r#"{{"t":1,"a":-0,{rest}}}"#),
        format!(r#"{{"t":1,"a":123456789012345678901234,{rest}}}"#),
        format!(r#"{{"t":1,"a":0.000001,{rest}}}"#),
        format!(r#"{{"t":1,"a":"dup","a2":1,"a2":2,{rest}}}"#),
        r#"{"t":1,"a":false,"x":{"b":1},"items":[{"sku":"only"}],"n":2,"we ird":0}"#.to_string(),
        r#"{"t":1,"a":false,"x":{"b":1},"items":[{"sku":"one"},{"sku":"two"},{"sku":"three"},{"sku":"four"}],"n":2,"we ird":0}"#.to_string(),
    ];
    let refused = [
        format!(r#"{{"t":1,"a":"x",{rest}"#),
        format!(r#"{{"t":1,"a":"x",{rest},}}"#),
        format!(r#"{{"t":1,"a":01,{rest}}}"#),
        format!(r#"{{"t":1,"a":1.,{rest}}}"#),
        format!(r#"{{"t":1,"a":+1,{rest}}}"#),
        format!(r#"{{"t":1,"a":1e400,{rest}}}"#),
        format!(r#"{{"t":1,"a":"x","skip":1e999,{rest}}}"#),
        format!(r#"{{"t":1,"a":"x\q",{rest}}}"#),
        format!(r#"{{"t":1,"a":"x","skip":"\ud800",{rest}}}"#),
        format!("{{\"t\":1,\"a\":\"x\u{1}\",{rest}}}"),
        format!(r#"{{"t":1,"a":tru,{rest}}}"#),
        format!(r#"{{"t":1,"a":"x",{rest}}} x"#),
        format!(r#"{{"t":1,"a":"x",{rest}}}{{}}"#),
        format!(r#"{{"t":1 "a":"x",{rest}}}"#),
        format!(r#"{{"t":1,"a":"x",{rest},"skip":[1 2]}}"#),
        format!(r#"{{"t":1,"a":"x",{rest},"skip":{{"q" 1}}}}"#),
    ];
    // Lines serde_json accepts that the scanner leaves to it: a duplicate key on a path (the
    // last wins), a null or compound value where a path ends, a missing field, an escaped
    // key, deep nesting.
    let deep = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let left = [
        format!(r#"{{"t":1,"a":"first","a":"last",{rest}}}"#),
        format!(r#"{{"t":1,"a":null,{rest}}}"#),
        format!(r#"{{"t":1,"a":{{"y":1}},{rest}}}"#),
        format!(r#"{{"t":1,{rest}}}"#),
        format!(r#"{{"t":1,"\u0061":"x",{rest}}}"#),
        format!(r#"{{"t":1,"a":"x",{rest},"deep":{deep}}}"#),
        format!(r#"{{"t":1,"a":"x","x":{{"b":1}},"items":[{{"sku":null}}],"n":1,"we ird":"w"}}"#),
        "[1]".to_string(),
        r#"{"t":1,"a":false,"x":{"b":1},"items":[],"n":2,"we ird":0}"#.to_string(),
    ];
    let time_of = |e: &Event| e.text[e.time.0..e.time.1].to_string();
    let dom = |line: &str| {
        let mut e = Event::default();
        e.reset(line, feed.fields.len());
        crate::event::parse_json_dom(feed, tp, line, &mut e).map(|()| (time_of(&e), e.to_vecs()))
    };
    // One event for every line: values of an earlier line must not show through.
    let reused = std::cell::RefCell::new(Event::default());
    let scan = |line: &str| {
        let mut e = reused.borrow_mut();
        e.reset(line, feed.fields.len());
        crate::json::extract(line, &feed.paths, tp, &feed.path_keys, &mut e).then(|| (time_of(&e), e.to_vecs()))
    };
    for line in &accepted {
        let want = dom(line).unwrap_or_else(|e| panic!("serde_json refuses {line}: {e}"));
        assert_eq!(scan(line), Some(want), "{line}");
    }
    for line in &refused {
        assert!(dom(line).is_err(), "serde_json accepts {line}");
        assert_eq!(scan(line), None, "{line}");
    }
    for line in &left {
        assert_eq!(scan(line), None, "{line}");
        // And parse_line_into gives serde_json's result for them.
        let mut e = Event::default();
        let got = parse_line_into(feed, line, &mut e).map(|_| e.to_vecs());
        assert_eq!(got.map_err(|e| e.0), dom(line).map(|(_, v)| v).map_err(|e| e.0), "{line}");
    }
}

/// `write_f64` (zmij, with `Display` for what zmij writes with an exponent) writes exactly
/// what `Display` writes (-0 as "0"): random bit patterns over every exponent, sums of
/// cents as the summaries accumulate them, and the edges of zmij's fixed-notation range.
#[test]
fn write_f64_is_display() {
    let display = |x: f64| if x == 0.0 { "0".to_string() } else { format!("{x}") };
    let check = |x: f64| {
        let mut got = Vec::new();
        crate::write_f64(x, &mut got);
        assert_eq!(String::from_utf8(got).unwrap(), display(x), "{x:e} ({:#x})", x.to_bits());
    };
    // xorshift64*: a fixed seed, so a failure reproduces.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..200_000 {
        let x = f64::from_bits(next());
        if x.is_finite() {
            check(x);
        }
    }
    // Uniform in [0, 1) times 1e-6..1e15: zmij's fixed notation, every digit count.
    for _ in 0..200_000 {
        let x = (next() >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((next() % 22) as i32 - 6);
        check(x);
    }
    let mut sum = 0.0;
    for _ in 0..200_000 {
        sum += (next() % 100_000) as f64 / 100.0;
        check(sum);
        check(-sum);
    }
    for e in -330..=310 {
        let p = format!("1e{e}").parse::<f64>().unwrap();
        for x in [p, p * 1.5, p * 9.999_999, p / 3.0, p - p / 1e17, -p] {
            check(x);
        }
    }
    for x in [0.0, -0.0, 1.0, -1.0, 0.1, 0.2 + 0.1, 1e15, 1e16, 9.999_999_999_999_999e15, 1e-5, 1e-6, 0.000_012_34, f64::MAX, f64::MIN_POSITIVE, 5e-324, f64::EPSILON, 123_456_789.125] {
        check(x);
    }
}

#[test]
fn groups_cross_the_wire_exactly() {
    let r = rules();
    let s = &r.summaries[0];
    let mut g = Group::new(s, vec!["c1".into(), "x y".into()]);
    let m = |n: &str| s.metric(n).unwrap();
    g.add_field(s, m("clicks"), b"3", Some(0));
    g.add_field(s, m("spend"), b"19824.27", Some(0));
    g.add_field(s, m("low"), b"0.1", Some(0));
    g.add_field(s, m("high"), b"1e300", Some(0));
    g.add_field(s, m("latest"), b"u7", Some(86400));
    g.add_members(m("exact_users"), [b"1".to_vec(), b"22".to_vec()].into_iter());
    let mut h = abacus_hll::Hll::new(abacus_hll::Params::default());
    h.add_raw(12345);
    g.add_hll(m("users"), &h).unwrap();
    let wire = g.to_wire();
    let back = Group::from_wire(s, &wire).expect("decodes");
    assert_eq!(back.key, g.key);
    assert_eq!(back.cells(s), g.cells(s));
    // (Set members travel in their set's order, which differs between two sets.)
    assert_eq!(back.to_wire().len(), wire.len());
    // Merging the copy behaves as merging the original.
    let (mut a, mut b) = (g.clone(), g.clone());
    a.merge(s, g.clone()).unwrap();
    b.merge(s, back).unwrap();
    assert_eq!(a.cells(s), b.cells(s));
    // Cut short or padded: refused.
    for cut in 0..wire.len() {
        assert!(Group::from_wire(s, &wire[..cut]).is_none(), "cut at {cut}");
    }
    let mut long = wire.clone();
    long.push(0);
    assert!(Group::from_wire(s, &long).is_none());
}
