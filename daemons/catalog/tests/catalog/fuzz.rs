//! A bounded fuzz run of the feed parser (proptest), seeded from the corpus: each case is
//! a corpus feed mutated (bytes flipped, cut, repeated, spliced with tokens that have
//! hurt feed parsers: wide encodings, BOMs, entities, CDATA, DTDs, version and namespace
//! changes) and given a random HTTP charset. No case may panic (a caught panic shows as
//! "the feed parser failed"), and every item taken must be an http(s) URL without
//! credentials. Cases: `ARCHIVIST_FUZZ_CASES` (default 20,000, about 3 s in a debug
//! build).

use archivist_catalog::feed::{parse_document, FeedBody};
use archivist_catalog::identity;
use archivist_catalog::CatalogError;
use proptest::prelude::*;

use crate::corpus::feeds_dir;

/// Text that has broken feed parsers, spliced into seeds.
const TOKENS: &[&[u8]] = &[
    b"<?xml version=\"1.0\" encoding=\"utf-16\"?>",
    b"<?xml version=\"1.0\" encoding=\"ucs-4\"?>",
    b"<?xml version='1.0' encoding='x-unknown'?>",
    b"\xff\xfe",
    b"\xfe\xff",
    b"\xff\xfe\x00\x00",
    b"\xef\xbb\xbf",
    b"\x00<\x00?",
    b"&eacute;",
    b"&#x0;",
    b"&#xD800;",
    b"&#99999999;",
    b"&amp;amp;",
    b"<![CDATA[",
    b"]]>",
    b"<!--",
    b"-->",
    b"<!DOCTYPE rss [<!ENTITY a \"&a;&a;\">]>",
    b"xml:base=\"../..\"",
    b"xml:base=\"file:///\"",
    b"<rss version=\"0.3\">",
    b"<rss>",
    b"<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">",
    b"<feed xmlns=\"http://purl.org/atom/ns#\">",
    b"<feed xmlns=\"http://www.w3.org/2005/Atom\">",
    b"<link rel=\"enclosure\" href=\"",
    b"<enclosure url=\"",
    b"<enclosure url=\"//h/a.mp3\" type=\"audio/mpeg\"/>",
    b"http://user:pass@h/a.mp3",
    b"file:///etc/passwd",
    b"{\"version\":\"https://jsonfeed.org/version/1.1\",\"items\":[{\"id\":1,\"attachments\":[{}]}]}",
    b"<item>",
    b"</item>",
    b"<entry>",
    b"<pubDate>Mon, 99 Foo 20244 99:99:99 +9999</pubDate>",
    b"<guid></guid>",
    b"\"",
    b"<",
    b"&",
];

const CHARSETS: &[&str] = &[
    "utf-8",
    "utf-16",
    "utf-16le",
    "UTF-32",
    "ucs-2",
    "koi8-r",
    "shift_jis",
    "x-bogus",
    "",
];

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(feeds_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml" || e == "json"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 25, "the corpus seeds the fuzz run");
    seeds
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize, usize),
    Repeat(usize, usize),
    Splice(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Flip(at, b)),
        (any::<usize>(), 0usize..64).prop_map(|(at, n)| Mutation::Cut(at, n)),
        (any::<usize>(), 0usize..256).prop_map(|(at, n)| Mutation::Repeat(at, n)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, t)| Mutation::Splice(at, t)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(doc: &mut Vec<u8>, m: &Mutation) {
    let at = |i: usize, doc: &Vec<u8>| {
        if doc.is_empty() {
            0
        } else {
            i % (doc.len() + 1)
        }
    };
    match *m {
        Mutation::Flip(i, b) if !doc.is_empty() => {
            let i = i % doc.len();
            doc[i] = b;
        }
        Mutation::Flip(..) => {}
        Mutation::Cut(i, n) => {
            let i = at(i, doc);
            let end = (i + n).min(doc.len());
            doc.drain(i..end);
        }
        Mutation::Repeat(i, n) => {
            let i = at(i, doc);
            let end = (i + n).min(doc.len());
            let copy = doc[i..end].to_vec();
            doc.splice(i..i, copy.iter().cycle().take(copy.len() * 3).copied());
        }
        Mutation::Splice(i, t) => {
            let i = at(i, doc);
            doc.splice(i..i, TOKENS[t].iter().copied());
        }
        Mutation::Truncate(i) => {
            let i = at(i, doc);
            doc.truncate(i);
        }
    }
}

fn cases() -> u32 {
    std::env::var("ARCHIVIST_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_feed_parser_never_panics_on_mutated_corpus_feeds(
        seed in 0usize..1_000,
        mutations in prop::collection::vec(mutation(), 0..6),
        charset in 0..CHARSETS.len(),
    ) {
        let seeds = SEEDS.with(|s| s.clone());
        let mut doc = seeds[seed % seeds.len()].clone();
        for m in &mutations {
            apply(&mut doc, m);
        }
        let body = FeedBody {
            bytes: doc,
            final_url: Some("http://fuzz.example/feeds/feed.xml".to_string()),
            http_charset: Some(CHARSETS[charset].to_string()).filter(|c| !c.is_empty()),
        };
        match parse_document("http://fuzz.example/feeds/feed.xml", &body, None) {
            Ok(parsed) => {
                for item in &parsed.items {
                    let url = &item.media_url;
                    prop_assert!(url.starts_with("http://") || url.starts_with("https://"), "{url}");
                    prop_assert!(!identity::has_credentials(url), "{url}");
                }
            }
            Err(CatalogError::MalformedFeed { reason, .. }) => {
                prop_assert!(
                    !reason.contains("parser failed"),
                    "a panic: {reason} on {:?}",
                    String::from_utf8_lossy(&body.bytes)
                );
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }
}

thread_local! {
    static SEEDS: Vec<Vec<u8>> = seeds();
}
