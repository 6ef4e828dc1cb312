//! The pruner of old test trees, against the real ZooKeeper.

use std::time::Duration;

use archivist_engine::zk;
use archivist_testkit::{delete_tree, prune_stale_trees, zk_connect};

async fn client() -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&zk_connect())
        .await
        .expect("connect")
}

async fn create_all(c: &zk::Client, paths: &[String]) {
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for p in paths {
        match c.create(p, b"x", &open).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => panic!("create {p}: {e}"),
        }
    }
}

#[tokio::test]
async fn delete_tree_removes_a_nested_tree_and_only_it() {
    let c = client().await;
    let root = format!(
        "/testkit-prune-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    let mut paths = vec![root.clone(), format!("{root}/keep"), format!("{root}/gone")];
    for i in 0..30 {
        paths.push(format!("{root}/gone/n{i}"));
        paths.push(format!("{root}/gone/n{i}/leaf"));
    }
    create_all(&c, &paths).await;
    delete_tree(&c, &format!("{root}/gone"))
        .await
        .expect("delete tree");
    assert_eq!(c.check_stat(&format!("{root}/gone")).await.unwrap(), None);
    assert!(c
        .check_stat(&format!("{root}/keep"))
        .await
        .unwrap()
        .is_some());
    delete_tree(&c, &root).await.expect("delete root");
    assert_eq!(c.check_stat(&root).await.unwrap(), None);
}

#[tokio::test]
async fn prune_takes_trees_older_than_the_age_and_leaves_younger_ones() {
    let c = client().await;
    let parent = format!(
        "/testkit-age-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    create_all(
        &c,
        &[
            parent.clone(),
            format!("{parent}/old"),
            format!("{parent}/old/x"),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    create_all(&c, &[format!("{parent}/young")]).await;
    let pruned = prune_stale_trees(&zk_connect(), &parent, Duration::from_secs(1))
        .await
        .expect("prune");
    assert_eq!(pruned, 1);
    assert_eq!(c.check_stat(&format!("{parent}/old")).await.unwrap(), None);
    assert!(c
        .check_stat(&format!("{parent}/young"))
        .await
        .unwrap()
        .is_some());
    delete_tree(&c, &parent).await.expect("clean up");
}

/// A test root an access-control test created with its own ACL (as `/test` was on a
/// fresh server when such a test ran first) is opened again: anonymous sessions can
/// create their chroots under it. Before, every other test failed with `NoAuth`.
#[tokio::test]
async fn a_test_root_closed_by_an_access_test_is_opened_to_every_test() {
    let root = format!(
        "/testkit-root-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    let owner = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_auth("digest", archivist_testkit::ACL_TEST_CREDENTIALS.as_bytes())
        .connect(&zk_connect())
        .await
        .expect("connect");
    let closed = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    owner
        .create(&root, b"", &closed)
        .await
        .expect("closed root");
    let anonymous = client().await;
    let child = format!("{root}/chroot");
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    assert_eq!(
        anonymous.create(&child, b"", &open).await.unwrap_err(),
        zk::Error::NoAuth
    );
    archivist_testkit::open_test_root(&zk_connect(), &root)
        .await
        .expect("open the root");
    anonymous
        .create(&child, b"", &open)
        .await
        .expect("a chroot under the opened root");
    // Opening an open root again changes nothing.
    archivist_testkit::open_test_root(&zk_connect(), &root)
        .await
        .expect("open it again");
    delete_tree(&anonymous, &root).await.expect("clean up");
}
