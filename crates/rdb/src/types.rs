//! The RDB format's constants (Redis's rdb.h).

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;

pub const OP_FUNCTION_PRE_GA: u8 = 0xF5;
pub const OP_FUNCTION2: u8 = 0xF6;
pub const OP_MODULE_AUX: u8 = 0xF7;
pub const OP_IDLE: u8 = 0xF8;
pub const OP_FREQ: u8 = 0xF9;
pub const OP_AUX: u8 = 0xFA;
pub const OP_RESIZEDB: u8 = 0xFB;
pub const OP_EXPIRETIME_MS: u8 = 0xFC;
pub const OP_EXPIRETIME: u8 = 0xFD;
pub const OP_SELECTDB: u8 = 0xFE;
pub const OP_EOF: u8 = 0xFF;

/// Length prefixes: `00` 6 bits, `01` 14 bits, `0x80` u32 BE, `0x81` u64 BE, `11` an encoding.
pub const LEN_32: u8 = 0x80;
pub const LEN_64: u8 = 0x81;
pub const ENC_MARK: u8 = 0xC0;
pub const ENC_INT8: u8 = 0;
pub const ENC_INT16: u8 = 1;
pub const ENC_INT32: u8 = 2;
pub const ENC_LZF: u8 = 3;

pub const QUICKLIST_NODE_PLAIN: u64 = 1;
pub const QUICKLIST_NODE_PACKED: u64 = 2;
