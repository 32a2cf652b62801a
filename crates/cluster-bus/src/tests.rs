use proptest::prelude::*;

use super::*;

fn name(c: u8) -> NodeName {
    NodeName([c; NAME_LEN])
}

fn header(kind: u16) -> Header {
    let mut slots = Slots::default();
    for s in [0, 1, 2, 5460, 16383] {
        slots.insert(s);
    }
    Header {
        kind,
        port: 7000,
        current_epoch: 0x0102_0304_0506_0708,
        config_epoch: 9,
        offset: 1 << 40,
        sender: name(b'a'),
        slots,
        replica_of: NodeName::NULL,
        ip: b"10.0.0.1".to_vec(),
        pport: 0,
        cport: 17000,
        flags: node_flags::MASTER | node_flags::MYSELF,
        state: 0,
        mflags: [0, 0, 0],
    }
}

fn ping() -> Message {
    let g = Gossip { name: name(b'b'), ping_sent: 1, pong_received: 2, ip: b"127.0.0.1".to_vec(), port: 7001, cport: 17001, flags: node_flags::SLAVE, pport: 0 };
    Message { header: header(kind::PING), body: Body::Ping { gossip: vec![g.clone(), Gossip { name: name(b'c'), ..g }], extensions: vec![Extension::Hostname(b"node-a.example".to_vec()), Extension::ShardId(name(b'd'))] } }
}

#[test]
fn the_header_sits_at_cluster_h_offsets() {
    let m = Message { header: header(kind::MFSTART), body: Body::Empty };
    let b = encode(&m);
    assert_eq!(b.len(), HEADER_LEN);
    assert_eq!(&b[0..4], b"RCmb");
    assert_eq!(&b[4..8], &(HEADER_LEN as u32).to_be_bytes());
    assert_eq!(&b[8..10], &[0, 1]);
    assert_eq!(&b[10..12], &7000u16.to_be_bytes());
    assert_eq!(&b[12..14], &kind::MFSTART.to_be_bytes());
    assert_eq!(&b[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&b[24..32], &9u64.to_be_bytes());
    assert_eq!(&b[40..80], &[b'a'; 40]);
    // Slots 0, 1, 2 are the low bits of the first byte; 16383 the top bit of the last.
    assert_eq!(b[80], 0b111);
    assert_eq!(b[80 + 2047], 0x80);
    assert_eq!(b[80 + 5460 / 8], 1 << (5460 % 8));
    assert_eq!(&b[2128..2168], &[0; 40]);
    assert_eq!(&b[2168..2176], b"10.0.0.1");
    assert_eq!(b[2176], 0);
    assert_eq!(&b[2248..2250], &17000u16.to_be_bytes());
    assert_eq!(&b[2250..2252], &17u16.to_be_bytes());
    assert_eq!(decode(&b).unwrap(), m);
}

#[test]
fn every_body_round_trips() {
    let mut update_slots = Slots::default();
    update_slots.insert(42);
    let bodies = [
        (kind::FAIL, Body::Fail { node: name(b'f') }),
        (kind::PUBLISH, Body::Publish { channel: b"news".to_vec(), message: b"hello".to_vec() }),
        (kind::PUBLISHSHARD, Body::Publish { channel: Vec::new(), message: Vec::new() }),
        (kind::FAILOVER_AUTH_REQUEST, Body::Empty),
        (kind::FAILOVER_AUTH_ACK, Body::Empty),
        (kind::UPDATE, Body::Update { config_epoch: 77, node: name(b'u'), slots: update_slots }),
        (kind::MODULE, Body::Module { module_id: 0xabcdef, kind: 3, payload: b"payload".to_vec() }),
        (99, Body::Unknown(b"from a future version".to_vec())),
    ];
    for (k, body) in bodies {
        let m = Message { header: header(k), body };
        let b = encode(&m);
        assert_eq!(decode(&b).unwrap(), m, "type {k}");
    }
    let p = ping();
    let b = encode(&p);
    // Two gossip sections, a hostname of 14 bytes + NUL padded to 16, a shard id of 40.
    assert_eq!(b.len(), HEADER_LEN + 2 * GOSSIP_LEN + (8 + 16) + (8 + 40));
    assert_eq!(&b[14..16], &2u16.to_be_bytes());
    assert_eq!(&b[2214..2216], &2u16.to_be_bytes());
    assert_eq!(b[2253] & flags0::EXT_DATA, flags0::EXT_DATA);
    let mut expected = p.clone();
    expected.header.mflags[0] |= flags0::EXT_DATA;
    assert_eq!(decode(&b).unwrap(), expected);
}

#[test]
fn gossip_fields_sit_where_redis_reads_them() {
    let b = encode(&ping());
    let g = &b[HEADER_LEN..HEADER_LEN + GOSSIP_LEN];
    assert_eq!(&g[..40], &[b'b'; 40]);
    assert_eq!(&g[40..44], &1u32.to_be_bytes());
    assert_eq!(&g[48..57], b"127.0.0.1");
    assert_eq!(&g[94..96], &7001u16.to_be_bytes());
    assert_eq!(&g[96..98], &17001u16.to_be_bytes());
    assert_eq!(&g[98..100], &node_flags::SLAVE.to_be_bytes());
}

#[test]
fn lengths_redis_refuses_are_refused() {
    let good = encode(&ping());
    // Signature, version.
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(decode(&b), Err(Error::Signature));
    let mut b = good.clone();
    b[9] = 2;
    assert_eq!(decode(&b), Err(Error::Version(2)));
    // A gossip count that does not match the length.
    let mut b = good.clone();
    b[15] = 3;
    assert!(matches!(decode(&b), Err(Error::Length { .. }) | Err(Error::Extension(_))));
    // An extension whose length is not a multiple of 8.
    let mut b = good.clone();
    let ext = HEADER_LEN + 2 * GOSSIP_LEN;
    b[ext..ext + 4].copy_from_slice(&20u32.to_be_bytes());
    assert_eq!(decode(&b), Err(Error::Extension(20)));
    // Trailing bytes after the extensions.
    let mut b = good.clone();
    b.extend_from_slice(&[0; 8]);
    let len = b.len() as u32;
    b[4..8].copy_from_slice(&len.to_be_bytes());
    assert!(matches!(decode(&b), Err(Error::Length { .. })));
    // Extensions present but not flagged: Redis does not count them, so the length is wrong.
    let mut b = good.clone();
    b[2253] &= !flags0::EXT_DATA;
    assert!(matches!(decode(&b), Err(Error::Length { .. })));
    // A publish whose lengths overrun the message.
    let mut b = encode(&Message { header: header(kind::PUBLISH), body: Body::Publish { channel: b"c".to_vec(), message: b"m".to_vec() } });
    b[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(decode(&b), Err(Error::Length { .. })));
    // A FAIL without its node name, a header shorter than a header.
    let mut b = encode(&Message { header: header(kind::FAIL), body: Body::Fail { node: name(b'x') } });
    b.truncate(HEADER_LEN + 10);
    b[4..8].copy_from_slice(&((HEADER_LEN + 10) as u32).to_be_bytes());
    assert!(matches!(decode(&b), Err(Error::Length { .. })));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&100u32.to_be_bytes());
    assert_eq!(decode(&b[..100]), Err(Error::TooShort(100)));
    assert!(matches!(decode(&good[..good.len() - 1]), Err(Error::Truncated(..))));
}

#[test]
fn the_reader_frames_a_stream_and_bounds_a_message() {
    let a = encode(&ping());
    let b = encode(&Message { header: header(kind::FAIL), body: Body::Fail { node: name(b'z') } });
    let stream = [a.clone(), b.clone()].concat();
    let mut r = Reader::new(64 * 1024);
    let mut got = Vec::new();
    for byte in &stream {
        r.feed(std::slice::from_ref(byte));
        while let Some(m) = r.next_message().unwrap() {
            got.push(m);
        }
    }
    assert_eq!(got.len(), 2);
    assert_eq!(encode(&got[0]), a);
    assert_eq!(encode(&got[1]), b);
    // A peer announcing 1 GB is refused at its first 8 bytes.
    let mut r = Reader::new(64 * 1024);
    let mut huge = a[..8].to_vec();
    huge[4..8].copy_from_slice(&(1u32 << 30).to_be_bytes());
    r.feed(&huge);
    assert_eq!(r.next_message(), Err(Error::TooLong(1 << 30, 64 * 1024)));
}

#[test]
fn key_hash_slot_is_redis_keyhashslot() {
    // Values from CLUSTER KEYSLOT on Redis 7.0.
    assert_eq!(key_hash_slot(b"foo"), 12182);
    assert_eq!(key_hash_slot(b"bar"), 5061);
    assert_eq!(key_hash_slot(b"hello"), 866);
    assert_eq!(key_hash_slot(b"somekey"), 11058);
    assert_eq!(key_hash_slot(b"123456789"), 0x31C3);
    // Hash tags: the first `{...}` with something inside.
    assert_eq!(key_hash_slot(b"{user1000}.following"), key_hash_slot(b"user1000"));
    assert_eq!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"foo{}{bar}"));
    assert_ne!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"bar"));
    assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
    assert_eq!(key_hash_slot(b"foo{bar}{zap}"), key_hash_slot(b"bar"));
    assert_eq!(key_hash_slot(b""), 0);
}

#[test]
fn slot_ranges() {
    let mut s = Slots::default();
    for x in (0..=5460).chain([5462, 16383]) {
        s.insert(x);
    }
    assert_eq!(s.count(), 5463);
    assert_eq!(s.ranges(), vec![(0, 5460), (5462, 5462), (16383, 16383)]);
    s.remove(0);
    assert!(!s.contains(0) && s.contains(1));
}

fn arb_name() -> impl Strategy<Value = NodeName> {
    prop::collection::vec(prop::sample::select(b"0123456789abcdef".to_vec()), NAME_LEN).prop_map(|v| NodeName(v.try_into().unwrap()))
}

fn arb_ip() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"0123456789.:abcdef".to_vec()), 0..IP_LEN)
}

fn arb_gossip() -> impl Strategy<Value = Gossip> {
    (arb_name(), any::<u32>(), any::<u32>(), arb_ip(), any::<u16>(), any::<u16>(), any::<u16>(), any::<u16>())
        .prop_map(|(name, ping_sent, pong_received, ip, port, cport, flags, pport)| Gossip { name, ping_sent, pong_received, ip, port, cport, flags, pport })
}

fn arb_ext() -> impl Strategy<Value = Extension> {
    prop_oneof![
        prop::collection::vec(1u8..=255, 0..40).prop_map(Extension::Hostname),
        arb_name().prop_map(Extension::ShardId),
        // A future extension whose data is already 8-byte aligned (what a sender writes).
        (2u16..100, prop::collection::vec(any::<u8>(), 0..5)).prop_map(|(kind, words)| Extension::Other { kind, data: words.iter().flat_map(|w| [*w; 8]).collect() }),
    ]
}

fn arb_message() -> impl Strategy<Value = Message> {
    let header = (any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>(), arb_name(), prop::collection::vec(0u16..16384, 0..20), arb_ip(), any::<u16>(), any::<u16>(), any::<u8>()).prop_map(
        |(port, current_epoch, config_epoch, offset, sender, slots, ip, cport, flags, state)| {
            let mut s = Slots::default();
            for x in slots {
                s.insert(x);
            }
            Header { kind: 0, port, current_epoch, config_epoch, offset, sender, slots: s, replica_of: NodeName::NULL, ip, pport: 0, cport, flags, state, mflags: [0, 0, 0] }
        },
    );
    let body = prop_oneof![
        (prop::sample::select(vec![kind::PING, kind::PONG, kind::MEET]), prop::collection::vec(arb_gossip(), 0..5), prop::collection::vec(arb_ext(), 0..4))
            .prop_map(|(k, gossip, extensions)| (k, Body::Ping { gossip, extensions })),
        arb_name().prop_map(|node| (kind::FAIL, Body::Fail { node })),
        (prop::collection::vec(any::<u8>(), 0..50), prop::collection::vec(any::<u8>(), 0..50)).prop_map(|(channel, message)| (kind::PUBLISH, Body::Publish { channel, message })),
        (any::<u64>(), any::<u8>(), prop::collection::vec(any::<u8>(), 0..50)).prop_map(|(module_id, kind, payload)| (kind::MODULE, Body::Module { module_id, kind, payload })),
    ];
    (header, body).prop_map(|(mut header, (k, body))| {
        header.kind = k;
        if matches!(&body, Body::Ping { extensions, .. } if !extensions.is_empty()) {
            header.mflags[0] |= flags0::EXT_DATA;
        }
        Message { header, body }
    })
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(m in arb_message()) {
        let b = encode(&m);
        prop_assert_eq!(decode(&b).unwrap(), m);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..3000), kind in 0u16..12, count in 0u16..4) {
        // A valid start (signature, length, version) with arbitrary rest: whatever it says,
        // decode answers.
        let mut b = bytes;
        b.resize(b.len().max(HEADER_LEN), 0);
        b[..4].copy_from_slice(SIGNATURE);
        let len = b.len() as u32;
        b[4..8].copy_from_slice(&len.to_be_bytes());
        b[8..10].copy_from_slice(&1u16.to_be_bytes());
        b[12..14].copy_from_slice(&kind.to_be_bytes());
        b[14..16].copy_from_slice(&count.to_be_bytes());
        let _ = decode(&b);
        let mut r = Reader::new(1 << 20);
        r.feed(&b);
        let _ = r.next_message();
    }
}
