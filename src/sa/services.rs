//! ServiceRecords (IBA 15.2.5.14): services requesters register, find and
//! remove, each with a lease.
//!
//! - A record is named by its RID: ServiceID, ServiceGID and ServiceP_Key;
//!   Set and Delete need ServiceID and ServiceGID in the mask (a P_Key left
//!   out is the default partition's, 0xFFFF), as OpenSM.
//! - ServiceLease is in seconds; 0xFFFFFFFF (or no lease in the mask) never
//!   expires; any other value expires the record that many seconds after
//!   its last Set (a lease of 0 at the next timeout).
//! - A record registered with a non-zero ServiceKey can only be changed or
//!   deleted by a request with the same key in the mask, or by a trusted
//!   requester: ERR_REQ_DENIED otherwise. (OpenSM lets anyone overwrite;
//!   the key exists to stop that.)
//! - Each record belongs to the port that registered it: capped per port
//!   and in all (ERR_NO_RESOURCES past a cap), removed when the port leaves
//!   the fabric.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::mad::pkey_table::DEFAULT_PKEY;
use crate::mad::sa::service_record::SERVICE_LEASE_INFINITE;
use crate::mad::sa::{service_mask, SaRecord, ServiceRecordRepr, SERVICE_RECORD_LEN};
use crate::types::Guid;

/// Component indexes: ServiceKey is what untrusted requesters never see.
pub(crate) const SECRETS: &[usize] = &[5];

type Rid = (u64, [u8; 16], u16);

#[derive(Debug, Clone)]
struct Entry {
    bytes: [u8; SERVICE_RECORD_LEN],
    key: [u8; 16],
    owner: Guid,
    expires: Option<Duration>,
}

/// Why a Set or Delete was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServiceError {
    /// ServiceID or ServiceGID missing from the mask (ERR_REQ_INVALID).
    Invalid,
    /// No record with that RID (ERR_NO_RECORDS).
    NoRecord,
    /// A ServiceKey protects it (ERR_REQ_DENIED).
    Denied,
    /// The port's or the SA's cap is reached (ERR_NO_RESOURCES).
    Full,
}

#[derive(Debug, Default)]
pub(crate) struct Services {
    entries: BTreeMap<Rid, Entry>,
    per_owner: HashMap<Guid, usize>,
    leases: BTreeSet<(Duration, Rid)>,
    /// Bumped by every store and removal (the state stream looks again).
    version: u64,
}

fn rid_of(r: &ServiceRecordRepr) -> Rid {
    (r.service_id, r.service_gid, r.service_pkey)
}

/// Whether a Set or Delete `mask` names a record: ServiceID and ServiceGID
/// both in it (the P_Key may be left to the default).
fn names_a_record(mask: u64) -> bool {
    let rid = service_mask::SERVICE_ID | service_mask::SERVICE_GID;
    mask & rid == rid
}

impl Services {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Changes so far.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every record's wire bytes with the port that registered it.
    pub fn records_by_owner(&self) -> impl Iterator<Item = (Guid, &[u8])> + '_ {
        self.entries.values().map(|e| (e.owner, &e.bytes[..]))
    }

    /// Registers or renews `rec` for `owner`; returns the record as stored.
    #[allow(clippy::too_many_arguments)]
    pub fn set(
        &mut self,
        now: Duration,
        mut rec: ServiceRecordRepr,
        mask: u64,
        owner: Guid,
        trusted: bool,
        per_port: usize,
        total: usize,
    ) -> Result<ServiceRecordRepr, ServiceError> {
        if !names_a_record(mask) {
            return Err(ServiceError::Invalid);
        }
        if mask & service_mask::SERVICE_PKEY == 0 {
            rec.service_pkey = DEFAULT_PKEY;
        }
        if mask & service_mask::SERVICE_LEASE == 0 {
            rec.service_lease = SERVICE_LEASE_INFINITE;
        }
        if mask & service_mask::SERVICE_KEY == 0 {
            rec.service_key = [0; 16];
        }
        let rid = rid_of(&rec);
        match self.entries.get(&rid) {
            Some(old) => {
                self.check_key(old, &rec, mask, trusted)?;
                let old_owner = old.owner;
                if old_owner != owner {
                    // Moves to the new registrant's count.
                    if self.per_owner.get(&owner).copied().unwrap_or(0) >= per_port {
                        return Err(ServiceError::Full);
                    }
                    self.forget_owner(old_owner);
                    *self.per_owner.entry(owner).or_default() += 1;
                }
            }
            None => self.admit(owner, per_port, total)?,
        }
        self.store(now, rid, &rec, owner);
        Ok(rec)
    }

    /// A record taken over from the master's (`super::mirror`): stored
    /// as it is, its lease re-armed from `now`, unless a record with its
    /// RID is here already (`Ok(false)`, nothing changed). `Err(Full)`
    /// past a cap.
    pub fn import(
        &mut self,
        now: Duration,
        rec: ServiceRecordRepr,
        owner: Guid,
        per_port: usize,
        total: usize,
    ) -> Result<bool, ServiceError> {
        let rid = rid_of(&rec);
        if self.entries.contains_key(&rid) {
            return Ok(false);
        }
        self.admit(owner, per_port, total)?;
        self.store(now, rid, &rec, owner);
        Ok(true)
    }

    /// Counts a new record for `owner`, unless that passes the port's cap
    /// (`per_port`) or the SA's (`total`).
    fn admit(&mut self, owner: Guid, per_port: usize, total: usize) -> Result<(), ServiceError> {
        if self.entries.len() >= total || self.per_owner.get(&owner).copied().unwrap_or(0) >= per_port {
            return Err(ServiceError::Full);
        }
        *self.per_owner.entry(owner).or_default() += 1;
        Ok(())
    }

    /// Stores `rec` under `rid` for `owner` (already counted), replacing
    /// what was there, its lease armed from `now`.
    fn store(&mut self, now: Duration, rid: Rid, rec: &ServiceRecordRepr, owner: Guid) {
        self.version += 1;
        if let Some(old) = self.entries.get(&rid) {
            if let Some(at) = old.expires {
                self.leases.remove(&(at, rid));
            }
        }
        let expires = (rec.service_lease != SERVICE_LEASE_INFINITE)
            .then(|| now + Duration::from_secs(u64::from(rec.service_lease)));
        if let Some(at) = expires {
            self.leases.insert((at, rid));
        }
        let mut bytes = [0u8; SERVICE_RECORD_LEN];
        // A buffer of LEN bytes always holds the record.
        let _ = SaRecord::emit(rec, &mut bytes);
        self.entries.insert(rid, Entry { bytes, key: rec.service_key, owner, expires });
    }

    /// Removes the record `rec` names; returns it as it was stored.
    pub fn delete(
        &mut self,
        rec: &ServiceRecordRepr,
        mask: u64,
        trusted: bool,
    ) -> Result<[u8; SERVICE_RECORD_LEN], ServiceError> {
        if !names_a_record(mask) {
            return Err(ServiceError::Invalid);
        }
        let mut named = rec.clone();
        if mask & service_mask::SERVICE_PKEY == 0 {
            named.service_pkey = DEFAULT_PKEY;
        }
        let rid = rid_of(&named);
        let old = self.entries.get(&rid).ok_or(ServiceError::NoRecord)?;
        self.check_key(old, rec, mask, trusted)?;
        Ok(self.remove(rid).bytes)
    }

    fn check_key(&self, old: &Entry, rec: &ServiceRecordRepr, mask: u64, trusted: bool) -> Result<(), ServiceError> {
        let keyed = old.key != [0; 16];
        let presented = mask & service_mask::SERVICE_KEY != 0 && rec.service_key == old.key;
        if keyed && !presented && !trusted {
            return Err(ServiceError::Denied);
        }
        Ok(())
    }

    fn remove(&mut self, rid: Rid) -> Entry {
        self.version += 1;
        let e = self.entries.remove(&rid).expect("the caller found it");
        if let Some(at) = e.expires {
            self.leases.remove(&(at, rid));
        }
        self.forget_owner(e.owner);
        e
    }

    fn forget_owner(&mut self, owner: Guid) {
        if let Some(n) = self.per_owner.get_mut(&owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&owner);
            }
        }
    }

    /// The next lease to run out.
    pub fn next_expiry(&self) -> Option<Duration> {
        self.leases.first().map(|(at, _)| *at)
    }

    /// Removes every record whose lease ran out by `now`; returns how many.
    pub fn expire(&mut self, now: Duration) -> usize {
        let mut n = 0;
        while let Some(&(at, rid)) = self.leases.first() {
            if at > now {
                break;
            }
            self.remove(rid);
            n += 1;
        }
        n
    }

    /// Removes the records of ports `alive` says are gone; returns how many.
    pub fn retain_owners(&mut self, alive: impl Fn(Guid) -> bool) -> usize {
        let gone: Vec<Rid> = self.entries.iter().filter(|(_, e)| !alive(e.owner)).map(|(r, _)| *r).collect();
        for rid in &gone {
            self.remove(*rid);
        }
        gone.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, lease: u32) -> ServiceRecordRepr {
        let mut r = ServiceRecordRepr::parse_bytes(&[0u8; SERVICE_RECORD_LEN]).unwrap();
        r.service_id = id;
        r.service_gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        r.service_lease = lease;
        r
    }

    const RID: u64 = service_mask::SERVICE_ID | service_mask::SERVICE_GID;
    const S: Duration = Duration::from_secs(1);

    #[test]
    fn set_renew_expire_and_delete() {
        let mut s = Services::default();
        let owner = Guid(7);
        let stored =
            s.set(Duration::ZERO, rec(1, 10), RID | service_mask::SERVICE_LEASE, owner, false, 4, 100).unwrap();
        assert_eq!((stored.service_pkey, stored.service_lease), (DEFAULT_PKEY, 10));
        assert_eq!(s.set(Duration::ZERO, rec(2, 10), RID, owner, false, 4, 100).unwrap().service_lease, u32::MAX);
        assert_eq!(s.next_expiry(), Some(10 * S));
        // Renewed at 5 s: lasts to 15 s.
        s.set(5 * S, rec(1, 10), RID | service_mask::SERVICE_LEASE, owner, false, 4, 100).unwrap();
        assert_eq!(s.expire(12 * S), 0);
        assert_eq!(s.expire(15 * S), 1);
        assert_eq!(s.len(), 1, "the infinite one stays");
        assert!(s.delete(&rec(2, 0), RID, false).is_ok());
        assert_eq!(s.delete(&rec(2, 0), RID, false), Err(ServiceError::NoRecord));
        assert_eq!(
            s.set(Duration::ZERO, rec(3, 0), service_mask::SERVICE_ID, owner, false, 4, 100).unwrap_err(),
            ServiceError::Invalid
        );
    }

    #[test]
    fn imports_add_what_is_missing_with_the_lease_rearmed() {
        let mut s = Services::default();
        s.set(Duration::ZERO, rec(1, 10), RID | service_mask::SERVICE_LEASE, Guid(1), false, 4, 100).unwrap();
        // The same RID from the mirror (another lease, a key) changes nothing.
        // Mirrored records are as the master stored them: P_Key filled in.
        let stored = |id, lease| ServiceRecordRepr { service_pkey: DEFAULT_PKEY, ..rec(id, lease) };
        let mut theirs = stored(1, 99);
        theirs.service_key = [3; 16];
        assert_eq!(s.import(20 * S, theirs, Guid(2), 4, 100), Ok(false));
        assert_eq!(s.next_expiry(), Some(10 * S), "ours kept its lease");
        assert_eq!(s.delete(&rec(1, 0), RID, false).map(|b| b[32]), Ok(0), "ours kept no key");
        // A new one: its lease runs from the import, its key protects it.
        let mut keyed = stored(2, 30);
        keyed.service_key = [9; 16];
        assert_eq!(s.import(5 * S, keyed, Guid(2), 1, 100), Ok(true));
        assert_eq!(s.next_expiry(), Some(35 * S));
        assert_eq!(s.delete(&rec(2, 0), RID, false), Err(ServiceError::Denied));
        assert_eq!(s.import(5 * S, stored(3, u32::MAX), Guid(2), 1, 100), Err(ServiceError::Full), "per port");
        assert_eq!(s.import(5 * S, stored(3, u32::MAX), Guid(3), 4, 1), Err(ServiceError::Full), "in all");
        assert_eq!(s.import(5 * S, stored(3, u32::MAX), Guid(3), 4, 100), Ok(true));
        assert_eq!(s.expire(35 * S), 1, "only the leased one expires");
        assert_eq!(s.retain_owners(|g| g != Guid(3)), 1, "imports belong to their owner");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn caps_keys_and_owners() {
        let mut s = Services::default();
        for id in 0..3 {
            s.set(Duration::ZERO, rec(id, 0), RID, Guid(1), false, 3, 5).unwrap();
        }
        assert_eq!(s.set(Duration::ZERO, rec(9, 0), RID, Guid(1), false, 3, 5), Err(ServiceError::Full));
        s.set(Duration::ZERO, rec(10, 0), RID, Guid(2), false, 3, 5).unwrap();
        s.set(Duration::ZERO, rec(11, 0), RID, Guid(2), false, 3, 5).unwrap();
        assert_eq!(s.set(Duration::ZERO, rec(12, 0), RID, Guid(3), false, 3, 5), Err(ServiceError::Full), "total");
        // A keyed record.
        let mut keyed = rec(0, 0);
        keyed.service_key = [9; 16];
        s.set(Duration::ZERO, keyed.clone(), RID | service_mask::SERVICE_KEY, Guid(1), false, 3, 5).unwrap();
        assert_eq!(s.delete(&rec(0, 0), RID, false), Err(ServiceError::Denied));
        assert_eq!(s.set(Duration::ZERO, rec(0, 0), RID, Guid(1), false, 3, 5), Err(ServiceError::Denied));
        assert!(s.delete(&keyed, RID | service_mask::SERVICE_KEY, false).is_ok());
        assert_eq!(s.retain_owners(|g| g != Guid(1)), 2);
        assert_eq!(s.len(), 2);
        assert!(s.set(Duration::ZERO, rec(12, 0), RID, Guid(3), true, 3, 5).is_ok(), "room again");
    }
}
