use archivist_matcher::{MatchConfig, MatchMode, Matcher};
use archivist_testaudio::{BedKind, ClipKind, Placement, Scenario};
fn main() {
    let mut s = Scenario::new(4, 20.0, BedKind::Speech);
    let c = s.add_clip("c", ClipKind::Sting, 1.0);
    s.place(c, 7.0, Placement::Splice);
    let r = s.render();
    for mode in [MatchMode::Exhaustive, MatchMode::Full, MatchMode::Fast] {
        let m = Matcher::new(
            &r.episode,
            MatchConfig {
                mode,
                ..Default::default()
            },
        );
        println!("{mode:?} {:?}", m.find_all(&r.clips));
    }
}
