use archivist_engine::config::Credentials;
use archivist_engine::schema::paths;
use archivist_engine::zk;
use archivist_engine::{Session, ZkConfig};

use crate::support::create;

fn creds(s: &str) -> Option<Credentials> {
    Credentials::parse(s)
}

#[tokio::test]
async fn only_the_daemons_write_and_the_reader_only_reads() {
    let base = archivist_testkit::config("acl");
    let daemons = base
        .clone()
        .with_credentials(creds("archivist:s3cret"))
        .with_reader(creds("ops:look"));
    let session = Session::connect(&daemons).await.unwrap();
    archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    let job = create(&session, 0, 1_700_000_000_000).await;
    let job_path = paths::job(&job.id);

    // Anonymous: no reads, no writes, no deletes.
    let anonymous = Session::connect(&ZkConfig {
        credentials: None,
        reader: None,
        ..base.clone()
    })
    .await
    .unwrap();
    let c = anonymous.client();
    assert_eq!(c.get_data(&job_path).await.unwrap_err(), zk::Error::NoAuth);
    assert_eq!(
        c.set_data(&job_path, b"x", None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        c.delete(&job_path, None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    assert_eq!(
        c.create("/jobs/intruder", b"", &open).await.unwrap_err(),
        zk::Error::NoAuth
    );

    // Read-only role: reads, but cannot write or delete.
    let reader = Session::connect(&base.clone().with_credentials(creds("ops:look")))
        .await
        .unwrap();
    let r = reader.client();
    let (data, _) = r.get_data(&job_path).await.expect("reader can read");
    assert!(String::from_utf8_lossy(&data).contains(&job.id));
    assert_eq!(
        r.set_data(&job_path, b"x", None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        r.delete(&job_path, None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        r.create("/jobs/intruder", b"", &open).await.unwrap_err(),
        zk::Error::NoAuth
    );

    // The daemons' credentials still write.
    session
        .client()
        .set_data(&job_path, &data, None)
        .await
        .expect("daemons write");
}
