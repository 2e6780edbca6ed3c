//! The transaction driver over a real broker (temporary data directory): a step that panics is
//! caught, the state reloaded from `__transaction_state`, and the next requests are served.

use super::*;
use crate::config::Config;

fn init(id: &str) -> impl FnOnce(oneshot::Sender<InitAnswer>) -> Request {
    let input = InitInput {
        transactional_id: id.to_string(),
        timeout_ms: 60_000,
        expected: None,
        fresh_producer_id: None,
    };
    move |tx| Request::InitProducerId(input, tx)
}

#[tokio::test]
async fn a_panicking_step_is_caught_and_the_state_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let inbox = b.txn_inbox.lock().take().expect("inbox");
    let (_stop_tx, stop) = watch::channel(false);
    let coordinator = load(&b, TxnConfig::from_config(&b.config));
    let task = tokio::spawn(run(b.clone(), coordinator, b.txn.view(), inbox, stop));

    let first = b.txn.call(init("t1")).await.expect("answered");
    assert_eq!((first.error, first.producer_epoch), (0, 0));
    assert!(b.txn.call::<()>(|_| Request::PanicForTest).await.is_none());
    // Reloaded from the log: the same producer id, its epoch bumped as for any re-init.
    let again = b
        .txn
        .call(init("t1"))
        .await
        .expect("served after the panic");
    assert_eq!(
        (again.error, again.producer_id, again.producer_epoch),
        (0, first.producer_id, 1)
    );
    assert!(!task.is_finished());
}
