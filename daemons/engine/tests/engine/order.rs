use std::collections::HashSet;

use archivist_engine::consumer;
use archivist_engine::queue;
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Transition};
use tokio_util::sync::CancellationToken;

use crate::support::create;

#[tokio::test]
async fn queues_list_and_serve_by_priority_then_newest_curation() {
    let (_config, session) = archivist_testkit::fresh_tree("order").await;
    let day = 86_400_000;
    let base = 1_700_000_000_000;
    // (priority, curated) in creation order; expected order is by priority desc, then date desc.
    let specs = [
        (0, base),
        (-5, base),
        (i64::MAX, base),
        (i64::MIN, base),
        (3, base),
        (3, base + day),
        (-1_000_000_000_000, base + 3 * day),
        (0, base - 365 * day),
    ];
    let mut created = Vec::new();
    for (p, c) in specs {
        created.push((p, c, create(&session, p, c).await.id));
    }
    let mut expected = created.clone();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let expected_ids: Vec<String> = expected.iter().map(|e| e.2.clone()).collect();

    let (entries, bad) = queue::list(&session, JobState::Pending).await.unwrap();
    assert!(bad.is_empty());
    let listed: Vec<String> = entries.iter().map(|e| e.job.clone()).collect();
    assert_eq!(listed, expected_ids);

    let mut served = Vec::new();
    while let Some(claimed) = consumer::claim_next(
        &session,
        JobState::Pending,
        "t",
        &HashSet::new(),
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    {
        served.push(claimed.job.id.clone());
        Transition::new(
            archivist_engine::transition::Role::Researcher,
            &claimed.job,
            claimed.version,
            JobState::Leased,
        )
        .lock(LockAction::Release(claimed.lock))
        .commit(&session)
        .await
        .unwrap();
    }
    assert_eq!(served, expected_ids);
}
