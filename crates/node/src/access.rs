//! How the configuration's memory policy is applied to the shards: the access tracking an
//! `*-lru` or `*-lfu` `maxmemory-policy` asks for, and whether small integers are shared. Run at
//! start-up and by CONFIG SET.

use strata_shard::db::Access;

use crate::config::Config;

/// Whether integers written under these settings are Redis's shared objects: unless `maxmemory`
/// is set with an LRU or LFU policy, which needs a clock per value.
pub fn shares_integers(config: &Config) -> bool {
    let policy = config.get("maxmemory-policy").unwrap_or_default();
    config.get_i64("maxmemory") == 0 || !(policy.ends_with("-lru") || policy.ends_with("-lfu"))
}

/// The access tracking the configuration asks for (an `*-lfu` policy tracks frequency).
pub fn access_for(policy: &str, log_factor: i64, decay_time: i64) -> Access {
    if policy.ends_with("-lfu") {
        Access::Lfu {
            log_factor: log_factor.clamp(0, u32::MAX as i64) as u32,
            decay_time: decay_time.clamp(0, u32::MAX as i64) as u32,
        }
    } else {
        Access::Lru
    }
}

/// Makes every database of `shard` record accesses the way the configuration asks (LRU clock, or
/// LFU counter under an `*-lfu` maxmemory-policy) and share small integers as Redis would
/// ([`shares_integers`]), and refreshes its eviction state for the current `maxmemory`
/// settings. Run at start-up and by CONFIG SET before it replies.
pub fn apply_access_policy(shard: &mut strata_shard::Shard, config: &Config) {
    let access = access_for(
        &config.get("maxmemory-policy").unwrap_or_default(),
        config.get_i64("lfu-log-factor"),
        config.get_i64("lfu-decay-time"),
    );
    let share = shares_integers(config);
    for db in shard.dbs_mut() {
        db.set_access(access);
        db.set_share_ints(share);
    }
    // After the access mode: an eviction it starts scores keys the way they are now recorded.
    strata_shard::evict::settings_changed(shard);
}
