//! Commands run on the connection's own thread, outside any sub-batch: connection commands (SELECT,
//! CLIENT…, which act on the session) and server-wide async work (DBSIZE, KEYS, FLUSHALL…). Both
//! are barriers (MULTI excepted, see [`Batch::run`]): what came before them in the pipeline has
//! taken effect when they run.

use bytes::Bytes;
use strata_node::table::{AsyncHandler, Resolved};
use strata_node::ConnCtx;
use strata_resp::ReplyBuf;
use strata_shard::now_us;

use super::route::ConnHandler;
use super::stats::{record_logged, reply_error};
use super::Batch;

impl Batch<'_> {
    pub(super) fn run_conn(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: ConnHandler,
        out: &mut ReplyBuf,
    ) {
        let start = now_us();
        let mut cx = ConnCtx::new(self.session, self.state, args, &mut *out, start / 1000);
        let result = f(&mut cx);
        let at = reply_error(cx.out, result);
        let error = at.map(|at| &out.buf[at..]);
        record_logged(cmd, args, &self.session.info, start, error);
    }

    pub(super) async fn run_async(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: AsyncHandler,
        out: &mut ReplyBuf,
    ) {
        let start = now_us();
        let mut cx = ConnCtx::new(self.session, self.state, args, &mut *out, start / 1000);
        let result = f(&mut cx).await;
        if strata_shard::propagate::on() {
            // A server-wide write (FLUSHALL, FLUSHDB, SWAPDB…) is propagated when it succeeds, as
            // Redis forces their propagation, unless it says otherwise.
            let prop = std::mem::take(&mut cx.prop);
            let wrote = result.is_ok() && cmd.spec.flags.has(strata_node::Flags::WRITE);
            let (txn, pos) = cx.prop_txn();
            prop.record_at(cx.db() as u32, txn, pos, args, wrote);
        }
        let at = reply_error(cx.out, result);
        let error = at.map(|at| &out.buf[at..]);
        record_logged(cmd, args, &self.session.info, start, error);
    }
}
