//! The driver's side of AlterShareGroupOffsets and DeleteShareGroupOffsets: the coordinator step
//! (`group::share_offsets`) is written to `__consumer_offsets` first (a failed write undoes it),
//! then the share-partition state is changed through the persister (`share_state`: initialized
//! at the new start offsets, or deleted), and the answer goes out once both writes are committed.

use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;

use super::{as_is, metadata_image, Driver};
use crate::group::Effects;
use crate::share_state::remote_code;

impl Driver {
    pub(super) async fn share_offsets_alter(
        &mut self,
        req: AlterShareGroupOffsetsRequest,
        tx: oneshot::Sender<AlterShareGroupOffsetsResponse>,
        now: i64,
    ) {
        let image = metadata_image(&self.broker);
        let group_id = req.group_id.to_string();
        let saved = self.coordinator.share_groups.get(&group_id).cloned();
        let step = self.coordinator.share_offsets_alter(&req, &image);
        let mut response = step.response;
        let written = match self
            .write_or_undo(&group_id, saved, step.records, now)
            .await
        {
            Ok(w) => w,
            Err(code) => {
                let _ = tx.send(
                    AlterShareGroupOffsetsResponse::default()
                        .with_error_code(code)
                        .with_error_message(None),
                );
                return;
            }
        };
        let initialized = crate::share_state::initialize(&self.broker, &step.initialize, now);
        for (key, code) in &initialized.failed {
            mark_failed(&mut response, key, *code);
        }
        let mut all = written;
        all.extend(initialized.written);
        if initialized.remote.is_empty() {
            self.reply(Ok(all), tx, response, as_is);
            return;
        }
        // Keys initialized at another broker's share coordinator: answered with their codes.
        let timeout_ms = self.broker.config.share_coordinator_write_timeout_ms;
        tokio::spawn(async move {
            for (key, answer) in initialized.remote {
                let code = remote_code(answer, timeout_ms).await;
                if code != crate::group::codes::NONE {
                    mark_failed(&mut response, &key, code);
                }
            }
            // As `reply` with `as_is`: the answer stands whether or not the wait succeeds.
            let _ = crate::internal_topic::committed(&all, timeout_ms).await;
            let _ = tx.send(response);
        });
    }

    pub(super) async fn share_offsets_delete(
        &mut self,
        req: DeleteShareGroupOffsetsRequest,
        tx: oneshot::Sender<DeleteShareGroupOffsetsResponse>,
        now: i64,
    ) {
        let image = metadata_image(&self.broker);
        let group_id = req.group_id.to_string();
        let saved = self.coordinator.share_groups.get(&group_id).cloned();
        let step = self.coordinator.share_offsets_delete(&req, &image);
        let mut response = step.response;
        let written = match self
            .write_or_undo(&group_id, saved, step.records, now)
            .await
        {
            Ok(w) => w,
            Err(code) => {
                let _ = tx.send(DeleteShareGroupOffsetsResponse::default().with_error_code(code));
                return;
            }
        };
        let deleted =
            crate::share_state::delete_topics(&self.broker, &group_id, &step.delete_topics, now);
        for (topic_id, code) in &deleted.failed {
            mark_topic_failed(&mut response, *topic_id, *code);
        }
        let mut all = written;
        all.extend(deleted.written);
        if deleted.remote.is_empty() {
            self.reply(Ok(all), tx, response, as_is);
            return;
        }
        // Keys deleted at another broker's share coordinator: answered with their codes.
        let timeout_ms = self.broker.config.share_coordinator_write_timeout_ms;
        tokio::spawn(async move {
            for (topic_id, answer) in deleted.remote {
                let code = remote_code(answer, timeout_ms).await;
                if code != crate::group::codes::NONE {
                    mark_topic_failed(&mut response, topic_id, code);
                }
            }
            // As `reply` with `as_is`: the answer stands whether or not the wait succeeds.
            let _ = crate::internal_topic::committed(&all, timeout_ms).await;
            let _ = tx.send(response);
        });
    }

    /// Writes a step's records; when the write fails, the group is put back as it was before
    /// the step (`saved`; `None`: the step created it, so it goes).
    async fn write_or_undo(
        &mut self,
        group_id: &str,
        saved: Option<crate::share::group::ShareGroup>,
        records: Vec<crate::group::CoordinatorRecord>,
        now: i64,
    ) -> Result<Vec<super::Written>, i16> {
        let fx = Effects {
            records,
            ..Effects::default()
        };
        let result = self.apply(fx, now).await;
        if result.is_err() {
            match saved {
                Some(g) => self
                    .coordinator
                    .share_groups
                    .insert(group_id.to_string(), g),
                None => self.coordinator.share_groups.remove(group_id),
            };
        }
        result
    }
}

/// Sets `code` on `key`'s partition of an AlterShareGroupOffsets answer.
fn mark_failed(
    response: &mut AlterShareGroupOffsetsResponse,
    key: &crate::share::registry::ShareKey,
    code: i16,
) {
    for t in response
        .responses
        .iter_mut()
        .filter(|t| t.topic_id == key.topic_id)
    {
        for p in t
            .partitions
            .iter_mut()
            .filter(|p| p.partition_index == key.partition)
        {
            p.error_code = code;
            p.error_message = None::<StrBytes>;
        }
    }
}

/// Sets `code` on `topic_id`'s entry of a DeleteShareGroupOffsets answer.
fn mark_topic_failed(
    response: &mut DeleteShareGroupOffsetsResponse,
    topic_id: uuid::Uuid,
    code: i16,
) {
    for t in response
        .responses
        .iter_mut()
        .filter(|t| t.topic_id == topic_id)
    {
        t.error_code = code;
    }
}
