//! The pool grants at most its capacity, makes a reader wait instead of failing, hands memory
//! back on drop, and grants a frame larger than the pool the whole pool.

use std::time::Duration;

use super::*;

#[tokio::test]
async fn grants_up_to_capacity_then_waits_until_memory_returns() {
    let pool = MemoryPool::new(1000);
    let a = pool.acquire(600).await;
    assert_eq!((a.bytes(), pool.in_use()), (600, 600));
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire(600).await.bytes() })
    };
    // The second grant cannot fit: it waits (observed through the gauge, not a clock).
    while pool.waiting() != 1 {
        tokio::task::yield_now().await;
    }
    assert_eq!(pool.in_use(), 600);
    drop(a);
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("grant after release")
        .expect("task");
    assert_eq!(got, 600);
    assert_eq!(pool.in_use(), 0);
    assert_eq!(pool.waiting(), 0);
    assert_eq!(pool.peak(), 600, "never two 600-byte grants at once");
}

#[tokio::test]
async fn a_frame_larger_than_the_pool_gets_the_whole_pool() {
    let pool = MemoryPool::new(1000);
    let big = pool.acquire(5000).await;
    assert_eq!(big.bytes(), 1000);
    assert_eq!(pool.in_use(), 1000);
    drop(big);
    let small = pool.acquire(10).await;
    assert_eq!(small.bytes(), 10);
    assert_eq!(pool.peak(), 1000);
}
