use archivist_matcher::decode::decode_file;
use archivist_matcher::{MatchConfig, MatchMode, Matcher};
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let ep = decode_file(std::path::Path::new(&a[0])).unwrap();
    let mode = if a[1] == "full" {
        MatchMode::Full
    } else {
        MatchMode::Exhaustive
    };
    let m = Matcher::new(
        &ep.samples,
        MatchConfig {
            mode,
            threshold: 0.2,
            ..Default::default()
        },
    );
    let clips: Vec<(String, Vec<f32>)> = a[2..]
        .iter()
        .map(|p| {
            (
                p.clone(),
                decode_file(std::path::Path::new(p)).unwrap().samples,
            )
        })
        .collect();
    for (c, r) in clips.iter().zip(m.find_all(&clips)) {
        for o in r.unwrap().occurrences {
            println!("{} {:?}", c.0, o);
        }
    }
}
