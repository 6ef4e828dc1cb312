use archivist_matcher::decode::decode_file;
use archivist_matcher::{MatchConfig, MatchMode, Matcher};
use std::time::Instant;
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let ep = decode_file(std::path::Path::new(&a[0])).unwrap();
    let mode = match a[1].as_str() {
        "full" => MatchMode::Full,
        "fast" => MatchMode::Fast,
        _ => MatchMode::Exhaustive,
    };
    let clips: Vec<(String, Vec<f32>)> = a[2..]
        .iter()
        .map(|p| {
            (
                p.clone(),
                decode_file(std::path::Path::new(p)).unwrap().samples,
            )
        })
        .collect();
    let t = Instant::now();
    let m = Matcher::new(
        &ep.samples,
        MatchConfig {
            mode,
            ..Default::default()
        },
    );
    let b = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let r = m.find_all(&clips);
    println!(
        "build {b:.3} match {:.3} occ {}",
        t.elapsed().as_secs_f64(),
        r.iter()
            .map(|r| r.as_ref().map_or(0, |r| r.occurrences.len()))
            .sum::<usize>()
    );
}
