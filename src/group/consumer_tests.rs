//! KIP-848 consumer-group state-machine tests: simulated clients and time, no sockets.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, OffsetCommitRequest,
    TopicName,
};
use uuid::Uuid;

use super::classic::sb;
use super::consumer::{ConsumerGroupState, ConsumerHeartbeatInput, MetadataImage, TopicImage};
use super::coordinator::Coordinator;
use super::*;

const T0: i64 = 1_000_000;
const TOPIC_ID: Uuid = Uuid::from_u128(0x1234);

fn image(partitions: i32) -> MetadataImage {
    BTreeMap::from([(
        "t".to_string(),
        TopicImage {
            id: TOPIC_ID,
            partitions,
        },
    )])
}

/// A client as the Java consumer behaves: it owns what the last assignment said.
struct Client {
    id: String,
    epoch: i32,
    owned: BTreeSet<i32>,
}

fn request(
    member_id: &str,
    epoch: i32,
    owned: Option<&BTreeSet<i32>>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(member_id))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 });
    if epoch == 0 {
        r.subscribed_topic_names = Some(vec![TopicName(sb("t"))]);
        r.topic_partitions = Some(Vec::new());
    } else if let Some(o) = owned {
        r.topic_partitions = Some(if o.is_empty() {
            Vec::new()
        } else {
            vec![TopicPartitions::default()
                .with_topic_id(TOPIC_ID)
                .with_partitions(o.iter().copied().collect())]
        });
    }
    r
}

fn send(
    c: &mut Coordinator,
    now: i64,
    version: i16,
    req: ConsumerGroupHeartbeatRequest,
    img: &MetadataImage,
) -> ConsumerGroupHeartbeatResponse {
    let input = ConsumerHeartbeatInput {
        version,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: req,
    };
    c.consumer_heartbeat(now, input, img)
}

impl Client {
    fn join(c: &mut Coordinator, now: i64, id: &str, img: &MetadataImage) -> Client {
        let mut client = Client {
            id: id.to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
        };
        let r = send(c, now, 1, request(id, 0, None), img);
        client.apply(&r);
        client
    }

    fn apply(&mut self, r: &ConsumerGroupHeartbeatResponse) {
        assert_eq!(r.error_code, codes::NONE, "{:?}", r.error_message);
        self.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            self.owned = a
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().copied())
                .collect();
        }
    }

    fn heartbeat(&mut self, c: &mut Coordinator, now: i64, img: &MetadataImage) {
        let r = send(
            c,
            now,
            1,
            request(&self.id, self.epoch, Some(&self.owned)),
            img,
        );
        self.apply(&r);
    }
}

/// No partition is owned by two clients at any time.
fn assert_disjoint(clients: &[Client]) {
    let mut seen = BTreeSet::new();
    for cl in clients {
        for p in &cl.owned {
            assert!(seen.insert(*p), "partition {p} owned twice");
        }
    }
}

/// Heartbeats every client in turn until the group is Stable; checks disjointness at each step.
fn converge(c: &mut Coordinator, clients: &mut [Client], now: &mut i64, img: &MetadataImage) {
    for _ in 0..10 {
        for i in 0..clients.len() {
            *now += 100;
            clients[i].heartbeat(c, *now, img);
            assert_disjoint(clients);
        }
        if c.consumer_groups["g"].state() == ConsumerGroupState::Stable {
            return;
        }
    }
    panic!("group did not converge");
}

fn coordinator() -> Coordinator {
    Coordinator::new(GroupConfig::default())
}

#[test]
fn three_members_converge_to_disjoint_full_assignment() {
    let img = image(6);
    let mut c = coordinator();
    let mut now = T0;
    let mut clients = vec![Client::join(&mut c, now, "a", &img)];
    assert_eq!(clients[0].owned.len(), 6);
    assert_eq!(clients[0].epoch, 1);

    // "b" joins: it gets nothing that "a" still owns; "a" must revoke first.
    clients.push(Client::join(&mut c, now, "b", &img));
    assert!(clients[1].owned.is_empty());
    assert_eq!(
        c.consumer_groups["g"].state(),
        ConsumerGroupState::Reconciling
    );
    let epoch_before = clients[0].epoch;
    clients[0].heartbeat(&mut c, now, &img);
    assert_eq!(clients[0].owned.len(), 3, "a keeps only its target");
    assert_eq!(
        clients[0].epoch, epoch_before,
        "epoch stays until the revocation is acked"
    );
    clients[0].heartbeat(&mut c, now, &img);
    assert!(clients[0].epoch > epoch_before);
    converge(&mut c, &mut clients, &mut now, &img);

    clients.push(Client::join(&mut c, now, "c", &img));
    converge(&mut c, &mut clients, &mut now, &img);
    let all: BTreeSet<i32> = clients.iter().flat_map(|cl| cl.owned.clone()).collect();
    assert_eq!(all, (0..6).collect());
    for cl in &clients {
        assert_eq!(cl.owned.len(), 2, "{} owns {:?}", cl.id, cl.owned);
        assert_eq!(cl.epoch, c.consumer_groups["g"].group_epoch);
    }
    let d = c.consumer_describe("g", &img);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.members.len(), 3);
}

#[test]
fn leave_and_session_timeout_move_partitions() {
    let img = image(6);
    let mut c = coordinator();
    let mut now = T0;
    let mut clients: Vec<Client> = ["a", "b", "c"]
        .iter()
        .map(|id| Client::join(&mut c, now, id, &img))
        .collect();
    converge(&mut c, &mut clients, &mut now, &img);

    // "c" leaves: its partitions go to the others.
    let r = send(&mut c, now, 1, request("c", -1, None), &img);
    assert_eq!((r.error_code, r.member_epoch), (codes::NONE, -1));
    clients.pop();
    converge(&mut c, &mut clients, &mut now, &img);
    let all: BTreeSet<i32> = clients.iter().flat_map(|cl| cl.owned.clone()).collect();
    assert_eq!(all, (0..6).collect());
    assert!(clients.iter().all(|cl| cl.owned.len() == 3));

    // "b" goes silent: after the session timeout "a" gets everything.
    let session = GroupConfig::default().consumer_session_timeout_ms as i64;
    now += session - 1_000;
    clients[0].heartbeat(&mut c, now, &img);
    assert_eq!(
        c.next_deadline(),
        Some(c.consumer_groups["g"].members["b"].session_deadline)
    );
    now = c.next_deadline().unwrap();
    c.tick(now);
    assert!(!c.consumer_groups["g"].members.contains_key("b"));
    clients.pop();
    converge(&mut c, &mut clients, &mut now, &img);
    assert_eq!(clients[0].owned, (0..6).collect());
}

#[test]
fn fenced_unknown_and_stale_epochs() {
    let img = image(6);
    let mut c = coordinator();
    let now = T0;
    let mut a = Client::join(&mut c, now, "a", &img);
    let r = send(
        &mut c,
        now,
        1,
        request("a", a.epoch + 5, Some(&a.owned)),
        &img,
    );
    assert_eq!(r.error_code, codes::FENCED_MEMBER_EPOCH);
    let r = send(&mut c, now, 1, request("nobody", 3, None), &img);
    assert_eq!(r.error_code, codes::UNKNOWN_MEMBER_ID);

    // After "b" joins, "a" moves to epoch 2; epoch 1 (its previous one) is still accepted while
    // it claims only what it is assigned, and fenced when it claims more.
    let mut b = Client::join(&mut c, now, "b", &img);
    a.heartbeat(&mut c, now, &img);
    a.heartbeat(&mut c, now, &img);
    b.heartbeat(&mut c, now, &img);
    assert_eq!(a.epoch, 2);
    let r = send(&mut c, now, 1, request("a", 1, Some(&a.owned)), &img);
    assert_eq!(r.error_code, codes::NONE);
    let r = send(
        &mut c,
        now,
        1,
        request("a", 1, Some(&(0..6).collect())),
        &img,
    );
    assert_eq!(r.error_code, codes::FENCED_MEMBER_EPOCH);

    // A fenced member rejoins with epoch 0 under the same id.
    let r = send(&mut c, now, 1, request("a", 0, None), &img);
    assert_eq!(r.error_code, codes::NONE);
    assert!(r.member_epoch >= 2);

    // OffsetCommit v9 checks the member epoch.
    let commit = |epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb("b"))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])])
    };
    let code = |c: &mut Coordinator, epoch| {
        c.commit_written(now, 9, &commit(epoch)).0.topics[0].partitions[0].error_code
    };
    assert_eq!(code(&mut c, b.epoch - 1), codes::STALE_MEMBER_EPOCH);
    assert_eq!(code(&mut c, b.epoch), codes::NONE);
    assert_eq!(c.offsets["g"][&("t".to_string(), 0)].offset, 5);
}

#[test]
fn v0_gets_a_broker_member_id_and_topic_growth_bumps_the_epoch() {
    let mut c = coordinator();
    let r = send(&mut c, T0, 0, request("", 0, None), &image(2));
    assert_eq!(r.error_code, codes::NONE);
    let id = r.member_id.unwrap().as_str().to_string();
    assert!(!id.is_empty());
    assert_eq!(r.member_epoch, 1);
    // v1 requires a client-made id.
    let r = send(&mut c, T0, 1, request("", 0, None), &image(2));
    assert_eq!(r.error_code, codes::INVALID_REQUEST);
    // Two more partitions: the group epoch moves and the member gets all four.
    let owned: BTreeSet<i32> = (0..2).collect();
    let r = send(&mut c, T0, 0, request(&id, 1, Some(&owned)), &image(4));
    assert_eq!(r.member_epoch, 2);
    let got: Vec<i32> = r.assignment.unwrap().topic_partitions[0].partitions.clone();
    assert_eq!(got, vec![0, 1, 2, 3]);
}

#[test]
fn classic_and_consumer_groups_convert_only_with_a_readable_consumer_protocol() {
    let mut c = coordinator();
    // A classic group whose member's metadata is no ConsumerProtocol subscription cannot be
    // upgraded (the online migration itself is tested in `migration_tests.rs`).
    let join = coordinator::JoinInput {
        version: 3,
        client_id: "x".into(),
        client_host: "h".into(),
        request: kafka_protocol::messages::JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(""))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(sb("range")),
            ]),
    };
    c.join(T0, join.clone(), 1);
    assert!(!c.groups["g"].members.is_empty());
    let r = send(&mut c, T0, 1, request("m", 0, None), &image(1));
    assert_eq!(r.error_code, codes::GROUP_ID_NOT_FOUND);

    // A consumer group with members refuses a JoinGroup it cannot read (Kafka's
    // UNKNOWN_SERVER_ERROR for a malformed embedded subscription).
    let mut c = coordinator();
    send(&mut c, T0, 1, request("m", 0, None), &image(1));
    let fx = c.join(T0, join, 3);
    assert_eq!(fx.joins[0].1.error_code, codes::UNKNOWN_SERVER_ERROR);
    let listed = c.list(&[], &[]);
    assert_eq!(listed[0].group_type.as_str(), "consumer");
    assert_eq!(listed[0].group_state.as_str(), "Stable");
}

#[test]
fn regex_subscriptions_follow_new_topics() {
    let mut img = image(2);
    img.insert(
        "other".into(),
        TopicImage {
            id: Uuid::from_u128(7),
            partitions: 1,
        },
    );
    img.insert(
        OFFSETS_TOPIC.into(),
        TopicImage {
            id: Uuid::from_u128(8),
            partitions: 1,
        },
    );
    let mut c = coordinator();
    let mut req = request("a", 0, None);
    req.subscribed_topic_names = None;
    req.subscribed_topic_regex = Some(sb("t.*|__consumer_offsets"));
    let r = send(&mut c, T0, 1, req, &img);
    assert_eq!(r.error_code, codes::NONE, "{:?}", r.error_message);
    let mut topics: Vec<Uuid> = r
        .assignment
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| t.topic_id)
        .collect();
    topics.sort();
    // Whole-name matches only ("other" is out); like Kafka, internal topics may match.
    assert_eq!(topics, vec![Uuid::from_u128(8), TOPIC_ID]);

    // A matching topic appears: the next heartbeat bumps the epoch and assigns it.
    img.insert(
        "t2".into(),
        TopicImage {
            id: Uuid::from_u128(9),
            partitions: 3,
        },
    );
    let r = send(&mut c, T0 + 100, 1, request("a", 1, None), &img);
    assert_eq!(r.member_epoch, 2);
    let got: usize = r
        .assignment
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| t.partitions.len())
        .sum();
    assert_eq!(got, 6);
    let d = c.consumer_describe("g", &img);
    assert_eq!(
        d.members[0]
            .subscribed_topic_regex
            .as_ref()
            .unwrap()
            .as_str(),
        "t.*|__consumer_offsets"
    );

    let mut bad = request("b", 0, None);
    bad.subscribed_topic_regex = Some(sb("(unclosed"));
    assert_eq!(
        send(&mut c, T0, 1, bad, &img).error_code,
        codes::INVALID_REGULAR_EXPRESSION
    );
}

#[test]
fn offset_delete_refuses_subscribed_topics_of_consumer_groups() {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let img = image(1);
    let mut c = coordinator();
    let a = Client::join(&mut c, T0, "a", &img);
    let req = |topic: &str| {
        kafka_protocol::messages::OffsetDeleteRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(TopicName(sb(topic)))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])])
    };
    let (r, _) = c.offset_delete_written(&req("t"));
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        codes::GROUP_SUBSCRIBED_TO_TOPIC
    );
    let (r, _) = c.offset_delete_written(&req("unrelated"));
    assert_eq!(
        (r.error_code, r.topics[0].partitions[0].error_code),
        (codes::NONE, codes::NONE)
    );
    assert_eq!(a.epoch, 1);
}

#[test]
fn static_member_leaves_temporarily_and_is_replaced() {
    let img = image(4);
    let mut c = coordinator();
    let with_instance =
        |id: &str, epoch: i32| request(id, epoch, None).with_instance_id(Some(sb("i1")));
    let r = send(&mut c, T0, 1, with_instance("a", 0), &img);
    assert_eq!((r.error_code, r.member_epoch), (codes::NONE, 1));
    // Another process with the same instance id while "a" is alive.
    let r = send(&mut c, T0, 1, with_instance("b", 0), &img);
    assert_eq!(r.error_code, codes::UNRELEASED_INSTANCE_ID);
    // "a" leaves temporarily: it keeps its place (and partitions) in the group.
    let r = send(&mut c, T0, 1, with_instance("a", -2), &img);
    assert_eq!((r.error_code, r.member_epoch), (codes::NONE, -2));
    assert_eq!(c.consumer_groups["g"].group_epoch, 1);
    // Its successor takes over at the same epoch, with the same assignment, no rebalance.
    let r = send(&mut c, T0 + 10, 1, with_instance("b", 0), &img);
    assert_eq!((r.error_code, r.member_epoch), (codes::NONE, 1));
    let got: usize = r
        .assignment
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| t.partitions.len())
        .sum();
    assert_eq!(got, 4);
    let g = &c.consumer_groups["g"];
    assert_eq!(g.group_epoch, 1);
    assert!(!g.members.contains_key("a"));
    assert_eq!(g.static_members["i1"], "b");
}

#[test]
fn list_filters_and_delete_of_consumer_groups() {
    let img = image(2);
    let mut c = coordinator();
    Client::join(&mut c, T0, "a", &img);
    assert!(c.list(&[], &["classic".into()]).is_empty());
    assert_eq!(c.list(&["stable".into()], &["Consumer".into()]).len(), 1);
    assert!(c.list(&["empty".into()], &[]).is_empty());
    let (r, _) = c.delete_groups_written(&["g".into()]);
    assert_eq!(r[0].error_code, codes::NON_EMPTY_GROUP);
    send(&mut c, T0, 1, request("a", -1, None), &img);
    assert_eq!(c.list(&[], &[])[0].group_state.as_str(), "Empty");
    let (r, _) = c.delete_groups_written(&["g".into()]);
    assert_eq!(r[0].error_code, codes::NONE);
    assert!(c.consumer_groups.is_empty() && c.list(&[], &[]).is_empty());
}
