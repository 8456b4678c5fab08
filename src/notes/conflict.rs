//! `INSERT ... ON CONFLICT DO NOTHING` into feedback_notes. The insert trigger turns a re-submission into a counted
//! report before Postgres looks for a conflict, so without help `DO NOTHING` would still count one. The trigger asks
//! here whether the statement being executed (the active portal's plan) is an INSERT into the notes table with
//! `ON CONFLICT DO NOTHING`; if so it leaves the row to Postgres, which skips it when the content is stored.
//! An INSERT run inside a function (SPI) is not the portal's own statement: it is not seen, and counts.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgList;

/// Whether the statement the client is running is an `INSERT INTO <relation> ... ON CONFLICT DO NOTHING` (also
/// inside a WITH query). VOLATILE: the answer depends on the statement running, not on the arguments.
#[pg_extern(volatile, parallel_restricted)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_on_conflict_do_nothing(relation: pg_sys::Oid) -> bool {
    // SAFETY: ActivePortal and the plans it holds are valid for the duration of the statement that calls us;
    // only node tags and plain fields are read, every pointer is checked for NULL first.
    unsafe {
        let portal = pg_sys::ActivePortal;
        if portal.is_null() {
            return false;
        }
        PgList::<pg_sys::Node>::from_pg((*portal).stmts).iter_ptr().any(|node| {
            if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_PlannedStmt {
                return false;
            }
            let stmt = node.cast::<pg_sys::PlannedStmt>();
            let subplans = PgList::<pg_sys::Plan>::from_pg((*stmt).subplans);
            let found = does_nothing_on(stmt, (*stmt).planTree, relation)
                || subplans.iter_ptr().any(|plan| does_nothing_on(stmt, plan, relation));
            found
        })
    }
}

/// # Safety
/// `stmt` is a valid PlannedStmt and `plan` NULL or one of its plans.
unsafe fn does_nothing_on(stmt: *mut pg_sys::PlannedStmt, plan: *mut pg_sys::Plan, relation: pg_sys::Oid) -> bool {
    if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_ModifyTable {
        return false;
    }
    let modify = plan.cast::<pg_sys::ModifyTable>();
    if (*modify).operation != pg_sys::CmdType::CMD_INSERT
        || (*modify).onConflictAction != pg_sys::OnConflictAction::ONCONFLICT_NOTHING
        || (*modify).nominalRelation == 0
    {
        return false;
    }
    let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg((*stmt).rtable);
    rtable.get_ptr((*modify).nominalRelation as usize - 1).is_some_and(|rte| !rte.is_null() && (*rte).relid == relation)
}
