//! `browse`: bounded pages of jobs (the web console's list) and failures by reason.

use archivist_admin::browse::{self, JobQuery};
use archivist_admin::jobs::JobFilter;
use archivist_admin::AdminSettings;
use archivist_engine::schema::JobState;

use crate::fixtures;

fn ids(page: &browse::JobPage) -> Vec<&str> {
    page.jobs.iter().map(|j| j.id.as_str()).collect()
}

#[tokio::test]
async fn pages_follow_the_cursor_filter_and_never_read_past_the_scan_limit() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-browse").await;
    let a = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let b = fixtures::failed_job(&s, "e0000002", "Download failed: HTTP 404").await;
    let c = fixtures::job(&s, "e0000001", &["c000002", "c000003"]).await;
    let d = fixtures::failed_job(&s, "e0000003", "not audio: an HTML page").await;
    let e = fixtures::failed_job(&s, "e0000004", "download failed: http 404").await;
    let settings = AdminSettings {
        batch_size: 2,
        ..AdminSettings::default()
    };
    let query = |limit, scan_limit| JobQuery {
        limit,
        scan_limit,
        ..JobQuery::default()
    };

    // Two per page, in id order, each page starting after the last one's end.
    let first = browse::page(&s, &settings, &query(2, 100)).await.unwrap();
    assert_eq!(ids(&first), [a.id.as_str(), b.id.as_str()]);
    assert_eq!(first.next.as_deref(), Some(b.id.as_str()));
    let second = browse::page(
        &s,
        &settings,
        &JobQuery {
            after: first.next.clone(),
            ..query(2, 100)
        },
    )
    .await
    .unwrap();
    assert_eq!(ids(&second), [c.id.as_str(), d.id.as_str()]);
    let third = browse::page(
        &s,
        &settings,
        &JobQuery {
            after: second.next.clone(),
            ..query(2, 100)
        },
    )
    .await
    .unwrap();
    assert_eq!(ids(&third), [e.id.as_str()]);
    assert_eq!(third.next, None, "nothing after the last job");

    // Filters: state with reason text (any case), episode, clip.
    let failed_404 = JobQuery {
        filter: JobFilter {
            state: Some(JobState::Failed),
            episode: None,
        },
        reason: Some("HTTP 404".into()),
        ..query(10, 100)
    };
    let page = browse::page(&s, &settings, &failed_404).await.unwrap();
    assert_eq!(ids(&page), [b.id.as_str(), e.id.as_str()]);
    let by_episode = JobQuery {
        filter: JobFilter {
            state: None,
            episode: Some("e0000001".into()),
        },
        ..query(10, 100)
    };
    let page = browse::page(&s, &settings, &by_episode).await.unwrap();
    assert_eq!(ids(&page), [a.id.as_str(), c.id.as_str()]);
    let by_clip = JobQuery {
        clip: Some("c000003".into()),
        ..query(10, 100)
    };
    let page = browse::page(&s, &settings, &by_clip).await.unwrap();
    assert_eq!(ids(&page), [c.id.as_str()]);

    // A filter that matches little reads at most scan_limit records, and says where to
    // go on from: the matching job beyond the limit is on a later page, not lost.
    let bounded = JobQuery {
        reason: Some("not audio".into()),
        ..query(10, 2)
    };
    let page = browse::page(&s, &settings, &bounded).await.unwrap();
    assert_eq!(page.scanned, 2);
    assert!(page.jobs.is_empty());
    assert_eq!(page.next.as_deref(), Some(b.id.as_str()));
    let page = browse::page(
        &s,
        &settings,
        &JobQuery {
            after: page.next.clone(),
            ..bounded
        },
    )
    .await
    .unwrap();
    assert_eq!(ids(&page), [d.id.as_str()]);
}

#[tokio::test]
async fn failures_are_grouped_by_their_reason_largest_first() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-failures").await;
    let settings = AdminSettings::default();
    let _ok = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let a = fixtures::failed_job(&s, "e0000002", "HTTP 404").await;
    let _b = fixtures::failed_job(&s, "e0000003", "HTTP 404").await;
    let c = fixtures::failed_job(&s, "e0000004", "not audio").await;
    let f = browse::failures_by_reason(&s, &settings, 100)
        .await
        .unwrap();
    assert_eq!((f.failed, f.read), (3, 3));
    let groups: Vec<(&str, usize, &str)> = f
        .groups
        .iter()
        .map(|g| (g.reason.as_str(), g.count, g.example.as_str()))
        .collect();
    assert_eq!(
        groups,
        [
            ("HTTP 404", 2, a.id.as_str()),
            ("not audio", 1, c.id.as_str())
        ]
    );
    let few = browse::failures_by_reason(&s, &settings, 1).await.unwrap();
    assert_eq!((few.failed, few.read), (3, 1), "says it read only part");
}

/// Outside try of #24, F5: download failures carry their URL, so one cause made one
/// group per job. Grouped by the reason (URLs and long numbers left out), they make one
/// group, whose `group` filter lists exactly its jobs; the groups are bounded.
#[tokio::test]
async fn failures_with_different_urls_and_one_cause_make_one_group() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-failure-groups").await;
    let settings = AdminSettings::default();
    let mut failed = Vec::new();
    for n in 1..=4 {
        let message = format!("GET http://127.0.0.1:47821/many/ep{n}.mp3 returned 404 Not Found");
        failed.push(fixtures::failed_job(&s, &format!("e000000{n}"), &message).await);
    }
    let other = fixtures::failed_job(&s, "e0000009", "GET http://h/x returned 500 Boom").await;
    let f = browse::failures_by_reason(&s, &settings, 100)
        .await
        .unwrap();
    let groups: Vec<(&str, usize)> = f
        .groups
        .iter()
        .map(|g| (g.reason.as_str(), g.count))
        .collect();
    assert_eq!(
        groups,
        [
            ("GET <url> returned 404 Not Found", 4),
            ("GET <url> returned 500 Boom", 1)
        ]
    );
    assert_eq!((f.more_groups, f.more_jobs), (0, 0));
    assert_eq!(f.groups[0].example, failed[0].id);
    assert!(f.groups[0].example_message.contains("/many/ep1.mp3"));
    let page = browse::page(
        &s,
        &settings,
        &JobQuery {
            group: Some(f.groups[0].reason.clone()),
            limit: 10,
            scan_limit: 100,
            ..JobQuery::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(page.jobs.len(), 4);
    assert!(page.jobs.iter().all(|j| j.id != other.id));
}

/// Outside try of #24, F10: a page every job matches reads that page's records, not a
/// whole batch (500 read for 50 shown).
#[tokio::test]
async fn a_page_every_job_matches_reads_only_its_records() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-browse-reads").await;
    for n in 1..=6 {
        fixtures::job(&s, &format!("e000000{n}"), &["c000001"]).await;
    }
    let page = browse::page(
        &s,
        &AdminSettings::default(),
        &JobQuery {
            limit: 2,
            scan_limit: 100,
            ..JobQuery::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(page.jobs.len(), 2);
    assert_eq!(page.scanned, 2, "read only the page's records");
    assert!(page.next.is_some());
}
