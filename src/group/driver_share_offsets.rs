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
        let (state_written, failed) =
            crate::share_state::initialize(&self.broker, &step.initialize, now);
        for (key, code) in failed {
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
        let mut all = written;
        all.extend(state_written);
        self.reply(Ok(all), tx, response, as_is);
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
        let (state_written, failed) =
            crate::share_state::delete_topics(&self.broker, &group_id, &step.delete_topics, now);
        for (topic_id, code) in failed {
            for t in response
                .responses
                .iter_mut()
                .filter(|t| t.topic_id == topic_id)
            {
                t.error_code = code;
            }
        }
        let mut all = written;
        all.extend(state_written);
        self.reply(Ok(all), tx, response, as_is);
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
