//! Redis 7.0's cluster bus messages, byte for byte: what nodes of a Redis Cluster send each
//! other on the bus port (the client port + 10000), so that Abacus nodes can form clusters
//! with each other and join clusters of redis-server nodes.
//!
//! The specification is Redis's `src/cluster.h` (`clusterMsg` and the structures of its
//! `data` union) and the validity rules of `clusterIsValidPacket` in `src/cluster.c`. A
//! message is a fixed 2,256-byte header ([`Header`]) followed by a body that depends on the
//! type ([`Body`]): gossip sections and ping extensions for PING/PONG/MEET, a node name for
//! FAIL, channel and message for PUBLISH/PUBLISHSHARD, a slot bitmap for UPDATE, a module
//! payload for MODULE, and nothing for the failover messages. Every integer is big-endian
//! (Redis's `htonl`/`htons`/`htonu64`); names are 40 hex characters, IPs NUL-padded text.
//!
//! [`decode`] accepts exactly what Redis accepts: the "RCmb" signature, protocol version 1,
//! and a total length equal to what the type and its counts imply (a gossip count, the
//! extensions' own lengths, multiples of 8, the publish lengths); a message of an unknown
//! type is taken as well formed, as Redis takes it, and its body kept as bytes. [`Reader`]
//! frames a byte stream into messages with an upper bound on a message's length, so a peer
//! that announces a huge length is refused before anything is allocated for it.
//! [`encode`] writes the lengths and counts from the body, so what it writes always decodes.
//!
//! Nothing here holds state or does I/O: the node's view of the cluster and its links are the
//! server's.

use thiserror::Error;

/// Hash slots of a cluster.
pub const SLOTS: usize = 16384;
/// A node name: 40 hexadecimal characters (a SHA-1 in hex).
pub const NAME_LEN: usize = 40;
/// Redis's NET_IP_STR_LEN: room for an IPv6 address and its NUL.
pub const IP_LEN: usize = 46;
/// The header's length (`offsetof(clusterMsg, data)`): Redis's CLUSTERMSG_MIN_LEN.
pub const HEADER_LEN: usize = 2256;
/// One gossip section (`clusterMsgDataGossip`).
pub const GOSSIP_LEN: usize = 104;
/// The protocol version Redis 7.0 speaks (CLUSTER_PROTO_VER).
pub const PROTOCOL_VERSION: u16 = 1;
/// The bus port of a node is its client port plus this (CLUSTER_PORT_INCR).
pub const PORT_INCR: u16 = 10000;
pub const SIGNATURE: &[u8; 4] = b"RCmb";

/// Message types (CLUSTERMSG_TYPE_*).
pub mod kind {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const PUBLISH: u16 = 4;
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    pub const UPDATE: u16 = 7;
    pub const MFSTART: u16 = 8;
    pub const MODULE: u16 = 9;
    pub const PUBLISHSHARD: u16 = 10;
    /// How many types Redis 7.0 knows (its per-type statistics arrays).
    pub const COUNT: u16 = 11;
}

/// Node flags (CLUSTER_NODE_*), in the header and in gossip sections.
pub mod node_flags {
    pub const MASTER: u16 = 1;
    pub const SLAVE: u16 = 2;
    pub const PFAIL: u16 = 4;
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;
}

/// The header's message flags, first byte (CLUSTERMSG_FLAG0_*).
pub mod flags0 {
    /// The primary is paused for a manual failover.
    pub const PAUSED: u8 = 1;
    /// Vote for this failover even though the primary is up (CLUSTER FAILOVER FORCE).
    pub const FORCEACK: u8 = 1 << 1;
    /// A PING/PONG/MEET carries extensions after its gossip sections.
    pub const EXT_DATA: u8 = 1 << 2;
}

/// Ping extension types (clusterMsgPingtypes).
pub mod ext_kind {
    pub const HOSTNAME: u16 = 0;
    pub const SHARDID: u16 = 1;
}

/// Why bytes are not a message Redis would accept.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Error {
    #[error("bad signature (not \"RCmb\")")]
    Signature,
    #[error("message length {0} below the header's {HEADER_LEN}")]
    TooShort(u32),
    #[error("message length {0} over the limit {1}")]
    TooLong(u32, u32),
    #[error("protocol version {0}, only 1 is spoken")]
    Version(u16),
    #[error("message length {got} where its type and counts imply {expected}")]
    Length { got: u32, expected: u64 },
    #[error("ping extension length {0} is not a multiple of 8, or runs past the message")]
    Extension(u32),
    #[error("{0} bytes given, the message announces {1}")]
    Truncated(usize, u32),
}

/// A node name: 40 bytes (hex characters; all zeros for "none", as Redis's
/// CLUSTER_NODE_NULL_NAME).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeName(pub [u8; NAME_LEN]);

impl Default for NodeName {
    fn default() -> NodeName {
        NodeName::NULL
    }
}

impl NodeName {
    pub const NULL: NodeName = NodeName([0; NAME_LEN]);

    /// The name from its 40 characters; None for another length.
    pub fn new(text: &[u8]) -> Option<NodeName> {
        Some(NodeName(text.try_into().ok()?))
    }

    pub fn is_null(&self) -> bool {
        self.0 == [0; NAME_LEN]
    }

    pub fn as_bytes(&self) -> &[u8; NAME_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for NodeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_null() {
            f.write_str("NodeName(null)")
        } else {
            write!(f, "NodeName({})", String::from_utf8_lossy(&self.0))
        }
    }
}

/// A slot bitmap as the bus carries it: slot `s` is bit `s % 8` of byte `s / 8`.
#[derive(Clone, PartialEq, Eq)]
pub struct Slots(pub Box<[u8; SLOTS / 8]>);

impl Default for Slots {
    fn default() -> Slots {
        Slots(Box::new([0; SLOTS / 8]))
    }
}

impl Slots {
    pub fn contains(&self, slot: u16) -> bool {
        let s = slot as usize % SLOTS;
        self.0[s / 8] & (1 << (s % 8)) != 0
    }

    pub fn insert(&mut self, slot: u16) {
        let s = slot as usize % SLOTS;
        self.0[s / 8] |= 1 << (s % 8);
    }

    pub fn remove(&mut self, slot: u16) {
        let s = slot as usize % SLOTS;
        self.0[s / 8] &= !(1 << (s % 8));
    }

    pub fn count(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// The slots set, in order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(|&s| self.contains(s))
    }

    /// The slots as inclusive ranges, in order (CLUSTER NODES's `0-5460 5462`).
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in self.iter() {
            match out.last_mut() {
                Some((_, end)) if *end + 1 == s => *end = s,
                _ => out.push((s, s)),
            }
        }
        out
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slots{:?}", self.ranges())
    }
}

/// The fixed part of every message (`clusterMsg` up to `data`). `totlen`, `count` and
/// `extensions` are not fields: [`encode`] derives them from the body.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    /// The message type ([`kind`]).
    pub kind: u16,
    /// The sender's client port (its TLS port when TLS is on).
    pub port: u16,
    pub current_epoch: u64,
    /// A primary's config epoch, or a replica's primary's.
    pub config_epoch: u64,
    /// A primary's replication offset, or what a replica processed.
    pub offset: u64,
    pub sender: NodeName,
    /// The slots the sender serves (a replica sends its primary's).
    pub slots: Slots,
    /// The sender's primary, or [`NodeName::NULL`].
    pub replica_of: NodeName,
    /// The sender's announced IP; empty: the receiver takes the connection's address.
    pub ip: Vec<u8>,
    /// The sender's plaintext client port when `port` is TLS.
    pub pport: u16,
    /// The sender's bus port.
    pub cport: u16,
    /// The sender's flags ([`node_flags`]).
    pub flags: u16,
    /// The cluster's state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    /// Message flags ([`flags0`] for the first byte). EXT_DATA is set by [`encode`] when a
    /// ping carries extensions.
    pub mflags: [u8; 3],
}

/// One gossip section of a PING/PONG/MEET: what the sender knows of another node.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Gossip {
    pub name: NodeName,
    /// Seconds (Unix time) of the sender's last ping to that node, 0 if none pending.
    pub ping_sent: u32,
    /// Seconds (Unix time) of the last pong the sender received from it.
    pub pong_received: u32,
    pub ip: Vec<u8>,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// A ping extension (`clusterMsgPingExt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extension {
    /// The sender's announced hostname (`cluster-announce-hostname`).
    Hostname(Vec<u8>),
    /// The sender's shard id.
    ShardId(NodeName),
    /// A type this version does not know: kept, so that a newer peer's extensions pass.
    Other { kind: u16, data: Vec<u8> },
}

/// A message's body, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG and MEET.
    Ping { gossip: Vec<Gossip>, extensions: Vec<Extension> },
    /// FAIL: the node the sender marks as failed.
    Fail { node: NodeName },
    /// PUBLISH and PUBLISHSHARD.
    Publish { channel: Vec<u8>, message: Vec<u8> },
    /// UPDATE: a node's slots at its config epoch.
    Update { config_epoch: u64, node: NodeName, slots: Slots },
    /// MODULE: a module's message (Abacus's own node-to-node messages may use it).
    Module { module_id: u64, kind: u8, payload: Vec<u8> },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: the header says it all.
    Empty,
    /// A type Redis 7.0 does not know: its bytes after the header.
    Unknown(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

// Offsets in the header (cluster.h's static asserts).
const OFF_TOTLEN: usize = 4;
const OFF_VER: usize = 8;
const OFF_PORT: usize = 10;
const OFF_TYPE: usize = 12;
const OFF_COUNT: usize = 14;
const OFF_CURRENT_EPOCH: usize = 16;
const OFF_CONFIG_EPOCH: usize = 24;
const OFF_OFFSET: usize = 32;
const OFF_SENDER: usize = 40;
const OFF_SLOTS: usize = 80;
const OFF_SLAVEOF: usize = 2128;
const OFF_MYIP: usize = 2168;
const OFF_EXTENSIONS: usize = 2214;
const OFF_PPORT: usize = 2246;
const OFF_CPORT: usize = 2248;
const OFF_FLAGS: usize = 2250;
const OFF_STATE: usize = 2252;
const OFF_MFLAGS: usize = 2253;

const FAIL_LEN: usize = NAME_LEN;
const PUBLISH_FIXED: usize = 8;
const UPDATE_LEN: usize = 8 + NAME_LEN + SLOTS / 8;
const MODULE_FIXED: usize = 13;
const EXT_HEADER: usize = 8;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn name_at(b: &[u8], at: usize) -> NodeName {
    NodeName(b[at..at + NAME_LEN].try_into().expect("40 bytes"))
}

/// A NUL-padded text field: the bytes before the first NUL.
fn text_at(b: &[u8], at: usize, len: usize) -> Vec<u8> {
    let field = &b[at..at + len];
    let end = field.iter().position(|&c| c == 0).unwrap_or(len);
    field[..end].to_vec()
}

fn put_text(out: &mut [u8], text: &[u8]) {
    // Always NUL-terminated, as Redis's memcpy of a C string into the field.
    let n = text.len().min(out.len() - 1);
    out[..n].copy_from_slice(&text[..n]);
    out[n..].fill(0);
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The length a message announces, from its first 8 bytes; checks the signature and that it
/// is at least a header, as Redis's read handler does before reading the rest.
pub fn announced_len(first8: &[u8]) -> Result<u32, Error> {
    if &first8[..4] != SIGNATURE {
        return Err(Error::Signature);
    }
    let totlen = u32_at(first8, OFF_TOTLEN);
    if (totlen as usize) < HEADER_LEN {
        return Err(Error::TooShort(totlen));
    }
    Ok(totlen)
}

/// Decodes one whole message (`bytes` is exactly its announced length), with Redis's
/// validity rules (see the top of this file).
pub fn decode(bytes: &[u8]) -> Result<Message, Error> {
    if bytes.len() < 8 {
        return Err(Error::Truncated(bytes.len(), 8));
    }
    let totlen = announced_len(bytes)?;
    if bytes.len() != totlen as usize {
        return Err(Error::Truncated(bytes.len(), totlen));
    }
    let ver = u16_at(bytes, OFF_VER);
    if ver != PROTOCOL_VERSION {
        return Err(Error::Version(ver));
    }
    let kind = u16_at(bytes, OFF_TYPE);
    let count = u16_at(bytes, OFF_COUNT) as usize;
    let mut slots = Slots::default();
    slots.0.copy_from_slice(&bytes[OFF_SLOTS..OFF_SLOTS + SLOTS / 8]);
    let header = Header {
        kind,
        port: u16_at(bytes, OFF_PORT),
        current_epoch: u64_at(bytes, OFF_CURRENT_EPOCH),
        config_epoch: u64_at(bytes, OFF_CONFIG_EPOCH),
        offset: u64_at(bytes, OFF_OFFSET),
        sender: name_at(bytes, OFF_SENDER),
        slots,
        replica_of: name_at(bytes, OFF_SLAVEOF),
        ip: text_at(bytes, OFF_MYIP, IP_LEN),
        pport: u16_at(bytes, OFF_PPORT),
        cport: u16_at(bytes, OFF_CPORT),
        flags: u16_at(bytes, OFF_FLAGS),
        state: bytes[OFF_STATE],
        mflags: [bytes[OFF_MFLAGS], bytes[OFF_MFLAGS + 1], bytes[OFF_MFLAGS + 2]],
    };
    let data = &bytes[HEADER_LEN..];
    let expect = |expected: u64| if expected == totlen as u64 { Ok(()) } else { Err(Error::Length { got: totlen, expected }) };
    let body = match kind {
        kind::PING | kind::PONG | kind::MEET => {
            let gossip_len = count * GOSSIP_LEN;
            if data.len() < gossip_len {
                return Err(Error::Length { got: totlen, expected: (HEADER_LEN + gossip_len) as u64 });
            }
            let gossip = data[..gossip_len].chunks_exact(GOSSIP_LEN).map(decode_gossip).collect();
            let mut rest = &data[gossip_len..];
            let mut extensions = Vec::new();
            if header.mflags[0] & flags0::EXT_DATA != 0 {
                for _ in 0..u16_at(bytes, OFF_EXTENSIONS) {
                    if rest.len() < EXT_HEADER {
                        return Err(Error::Extension(rest.len() as u32));
                    }
                    let len = u32_at(rest, 0);
                    if !(len as usize).is_multiple_of(8) || (len as usize) < EXT_HEADER || len as usize > rest.len() {
                        return Err(Error::Extension(len));
                    }
                    extensions.push(decode_extension(u16_at(rest, 4), &rest[EXT_HEADER..len as usize]));
                    rest = &rest[len as usize..];
                }
            }
            // Bytes past the gossip and the extensions: Redis's length check fails.
            expect((totlen as usize - rest.len()) as u64)?;
            Body::Ping { gossip, extensions }
        }
        kind::FAIL => {
            expect((HEADER_LEN + FAIL_LEN) as u64)?;
            Body::Fail { node: name_at(data, 0) }
        }
        kind::PUBLISH | kind::PUBLISHSHARD => {
            if data.len() < PUBLISH_FIXED {
                return Err(Error::Length { got: totlen, expected: (HEADER_LEN + PUBLISH_FIXED + 8) as u64 });
            }
            let (channel_len, message_len) = (u32_at(data, 0) as u64, u32_at(data, 4) as u64);
            // sizeof(clusterMsgDataPublish) - 8 + channel_len + message_len, as Redis counts.
            expect((HEADER_LEN + PUBLISH_FIXED) as u64 + channel_len + message_len)?;
            let channel = data[8..8 + channel_len as usize].to_vec();
            let message = data[8 + channel_len as usize..].to_vec();
            Body::Publish { channel, message }
        }
        kind::FAILOVER_AUTH_REQUEST | kind::FAILOVER_AUTH_ACK | kind::MFSTART => {
            expect(HEADER_LEN as u64)?;
            Body::Empty
        }
        kind::UPDATE => {
            expect((HEADER_LEN + UPDATE_LEN) as u64)?;
            let mut slots = Slots::default();
            slots.0.copy_from_slice(&data[8 + NAME_LEN..UPDATE_LEN]);
            Body::Update { config_epoch: u64_at(data, 0), node: name_at(data, 8), slots }
        }
        kind::MODULE => {
            if data.len() < MODULE_FIXED {
                return Err(Error::Length { got: totlen, expected: (HEADER_LEN + 16) as u64 });
            }
            let len = u32_at(data, 8) as u64;
            // sizeof(clusterMsgModule) - 3 + len.
            expect((HEADER_LEN + MODULE_FIXED) as u64 + len)?;
            Body::Module { module_id: u64_at(data, 0), kind: data[12], payload: data[MODULE_FIXED..].to_vec() }
        }
        // Redis takes a type it does not know as well formed, whatever its length.
        _ => Body::Unknown(data.to_vec()),
    };
    Ok(Message { header, body })
}

fn decode_gossip(g: &[u8]) -> Gossip {
    Gossip {
        name: name_at(g, 0),
        ping_sent: u32_at(g, 40),
        pong_received: u32_at(g, 44),
        ip: text_at(g, 48, IP_LEN),
        port: u16_at(g, 94),
        cport: u16_at(g, 96),
        flags: u16_at(g, 98),
        pport: u16_at(g, 100),
    }
}

fn decode_extension(kind: u16, data: &[u8]) -> Extension {
    match kind {
        ext_kind::HOSTNAME => Extension::Hostname(data.iter().take_while(|&&c| c != 0).copied().collect()),
        ext_kind::SHARDID if data.len() >= NAME_LEN => Extension::ShardId(name_at(data, 0)),
        _ => Extension::Other { kind, data: data.to_vec() },
    }
}

/// Encodes a message: the header with the length, gossip count and extension count the body
/// implies (and EXT_DATA set when a ping carries extensions), then the body.
pub fn encode(m: &Message) -> Vec<u8> {
    let h = &m.header;
    let mut out = vec![0u8; HEADER_LEN];
    out[..4].copy_from_slice(SIGNATURE);
    out[OFF_VER..OFF_VER + 2].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    out[OFF_PORT..OFF_PORT + 2].copy_from_slice(&h.port.to_be_bytes());
    out[OFF_TYPE..OFF_TYPE + 2].copy_from_slice(&h.kind.to_be_bytes());
    out[OFF_CURRENT_EPOCH..OFF_CURRENT_EPOCH + 8].copy_from_slice(&h.current_epoch.to_be_bytes());
    out[OFF_CONFIG_EPOCH..OFF_CONFIG_EPOCH + 8].copy_from_slice(&h.config_epoch.to_be_bytes());
    out[OFF_OFFSET..OFF_OFFSET + 8].copy_from_slice(&h.offset.to_be_bytes());
    out[OFF_SENDER..OFF_SENDER + NAME_LEN].copy_from_slice(&h.sender.0);
    out[OFF_SLOTS..OFF_SLOTS + SLOTS / 8].copy_from_slice(&h.slots.0[..]);
    out[OFF_SLAVEOF..OFF_SLAVEOF + NAME_LEN].copy_from_slice(&h.replica_of.0);
    put_text(&mut out[OFF_MYIP..OFF_MYIP + IP_LEN], &h.ip);
    out[OFF_PPORT..OFF_PPORT + 2].copy_from_slice(&h.pport.to_be_bytes());
    out[OFF_CPORT..OFF_CPORT + 2].copy_from_slice(&h.cport.to_be_bytes());
    out[OFF_FLAGS..OFF_FLAGS + 2].copy_from_slice(&h.flags.to_be_bytes());
    out[OFF_STATE] = h.state;
    out[OFF_MFLAGS..OFF_MFLAGS + 3].copy_from_slice(&h.mflags);
    match &m.body {
        Body::Ping { gossip, extensions } => {
            out[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&(gossip.len() as u16).to_be_bytes());
            for g in gossip {
                encode_gossip(&mut out, g);
            }
            if !extensions.is_empty() {
                out[OFF_EXTENSIONS..OFF_EXTENSIONS + 2].copy_from_slice(&(extensions.len() as u16).to_be_bytes());
                out[OFF_MFLAGS] |= flags0::EXT_DATA;
                for e in extensions {
                    encode_extension(&mut out, e);
                }
            } else {
                out[OFF_MFLAGS] &= !flags0::EXT_DATA;
            }
        }
        Body::Fail { node } => out.extend_from_slice(&node.0),
        Body::Publish { channel, message } => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(message.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Update { config_epoch, node, slots } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(&node.0);
            out.extend_from_slice(&slots.0[..]);
        }
        Body::Module { module_id, kind, payload } => {
            out.extend_from_slice(&module_id.to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.push(*kind);
            out.extend_from_slice(payload);
        }
        Body::Empty => {}
        Body::Unknown(data) => out.extend_from_slice(data),
    }
    let totlen = out.len() as u32;
    out[OFF_TOTLEN..OFF_TOTLEN + 4].copy_from_slice(&totlen.to_be_bytes());
    out
}

fn encode_gossip(out: &mut Vec<u8>, g: &Gossip) {
    let mut b = [0u8; GOSSIP_LEN];
    b[..NAME_LEN].copy_from_slice(&g.name.0);
    b[40..44].copy_from_slice(&g.ping_sent.to_be_bytes());
    b[44..48].copy_from_slice(&g.pong_received.to_be_bytes());
    put_text(&mut b[48..48 + IP_LEN], &g.ip);
    b[94..96].copy_from_slice(&g.port.to_be_bytes());
    b[96..98].copy_from_slice(&g.cport.to_be_bytes());
    b[98..100].copy_from_slice(&g.flags.to_be_bytes());
    b[100..102].copy_from_slice(&g.pport.to_be_bytes());
    out.extend_from_slice(&b);
}

fn encode_extension(out: &mut Vec<u8>, e: &Extension) {
    let (kind, data): (u16, Vec<u8>) = match e {
        // NUL-terminated, padded to 8 bytes (getHostnamePingExtSize).
        Extension::Hostname(h) => (ext_kind::HOSTNAME, [&h[..], &[0]].concat()),
        Extension::ShardId(id) => (ext_kind::SHARDID, id.0.to_vec()),
        Extension::Other { kind, data } => (*kind, data.clone()),
    };
    let len = EXT_HEADER + align8(data.len());
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&data);
    out.resize(out.len() + align8(data.len()) - data.len(), 0);
}

/// Frames a bus connection's bytes into messages. `max_len` bounds one message: a peer that
/// announces more is refused at its first 8 bytes (the link is then closed, as Redis closes
/// one that sends a bad signature or length).
pub struct Reader {
    buf: Vec<u8>,
    max_len: u32,
}

impl Reader {
    pub fn new(max_len: u32) -> Reader {
        Reader { buf: Vec::new(), max_len }
    }

    /// Adds bytes read from the link.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message, None until one has fully arrived, or the error that must
    /// close the link.
    pub fn next_message(&mut self) -> Result<Option<Message>, Error> {
        if self.buf.len() < 8 {
            return Ok(None);
        }
        let totlen = announced_len(&self.buf[..8])?;
        if totlen > self.max_len {
            return Err(Error::TooLong(totlen, self.max_len));
        }
        if self.buf.len() < totlen as usize {
            return Ok(None);
        }
        let m = decode(&self.buf[..totlen as usize]);
        self.buf.drain(..totlen as usize);
        m.map(Some)
    }
}

/// The hash slot of a key: CRC16 (XMODEM) of the key, or of its `{hash tag}` when it has a
/// non-empty one, modulo 16384 (Redis's keyHashSlot).
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &key[open + 1..open + 1 + close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS as u16 - 1)
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis's crc16.c.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests;
