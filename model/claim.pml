/*
 * model/claim.pml — the claim protocol for one key, as the module runs it on
 * Redis, for SPIN. model/README.md says what is modelled, what is left out,
 * the properties, and walks through the counterexamples.
 *
 * Each step names the function of module/ it stands for. Time is counted in
 * ticks and kept relative (ages and time left), so that the state space is
 * finite without a horizon.
 *
 * Switches (each reproduces a defect; `make verify` expects a trail):
 *   PUTBACK_LOCK_TTL   the put-back restores with PX lock_ttl, not PXAT
 *   NO_FENCE           the store script writes without checking the claim
 *   RELEASE_EXECUTED   a request that may have reached the upstream releases
 *   NO_MARGIN          the lease lasts the whole lock_ttl
 *   PUTBACK_CLAIM      the put-back restores another request's claim too
 *   OOM_GIVES_UP       a store refused for memory gives up after its attempts,
 *                      leaving its claim kept for idempotency_ttl
 *   UNCONDITIONAL      (with IFEQ) the store is a plain SET key record PX ttl
 *                      GET: written whatever the key holds
 *   RENEW_NO_FALLBACK  (with IFEQ and OOM) a conditional renewal refused for
 *                      memory is left at that, not sent again as the script
 *   KEEP_IFEQ          (with IFEQ and OOM) the keep of a claim whose store Redis
 *                      refused for memory goes as the conditional SET too
 *                      (and, refused, again as the script, behind its store)
 * Configurations:
 *   LOSS               Redis may fail over, once, to a replica that missed
 *                      writes (or restart empty)
 *   CLAIM_ONCE         check one execution, loss or not
 *   SAME_FP            every request has the same fingerprint (otherwise
 *                      request A's differs from B's and C's)
 *   OOM                Redis may fill up (maxmemory, noeviction), once, and
 *                      be freed again, once: while full, every write that
 *                      needs memory is refused (OOM) and nothing is done
 *   IFEQ               the server has a conditional write (SET ... IFEQ:
 *                      Valkey >= 8.1, Redis >= 8.4; DELIFEQ, DELEX ... IFEQ)
 *                      and every connection knows it: each store, renewal and
 *                      release goes by it; no lease, no put-back. With OOM,
 *                      a renewal by SET is refused while Redis is full (SET
 *                      is deny-oom, PEXPIRE is not): it goes again at once
 *                      as the script
 *   MIXED              (with IFEQ) each store, renewal and release goes either
 *                      way: today's (the lease, the scripts) or the
 *                      conditional write — a connection that has not learnt
 *                      the server's features yet, a fleet of mixed versions
 *   FREE_CLOCKS        neither of the lease's clock assumptions: Redis's clock
 *                      may run ahead without bound, and a store may take any
 *                      time to reach Redis
 */

/* ------------------------------------------------------------ parameters */

#ifndef N
#define N 3             /* requests for the key (A, B, C), each on its own gateway */
#endif
#define L 4             /* idempotency_lock_ttl */
#define RT 1            /* idempotency_redis_timeout: a claim's answer is awaited this long, and a
                           leased store runs on Redis within it of being sent (lease.hpp, assumption 2) */
#ifndef DRIFT
#define DRIFT 1
#endif
/* DRIFT: how far Redis's clock may run ahead of the gateways' (lease.hpp, assumption 1) */
#ifdef NO_MARGIN
#define MARGIN 0
#else
#define MARGIN (RT + DRIFT) /* lease_margin(): idempotency_redis_timeout + lock_ttl / 10 */
#endif
#define LEASE (L - MARGIN)  /* lease_end() - sent */
#ifndef RENEWALS
#define RENEWALS 1      /* on_renew: renewals a request sends while its upstream runs */
#endif
#define ATTEMPTS 2      /* ScriptCalls::failed: attempts at a store, release or put-back */
#ifndef LOOKS
#define LOOKS 1         /* wait.cpp look(): looks again of a request that found the key in flight */
#endif
#ifndef FULL
#define FULL N          /* requests from this one on are retries that only claim and, if
                           granted, execute: what a third request adds to the properties */
#endif
#ifndef FAULTS
#define FAULTS 1        /* lost replies and commands dropped with their connection, in all */
#endif
#ifdef LOSS
#define MAXLOSS 1
#else
#define MAXLOSS 0
#endif
#ifdef CLAIM_ONCE
#define ALLOWED (1 + lapses)
#else
#define ALLOWED (1 + lapses + losses)
#endif
/* SCRIPTS: a command may go today's way (the lease and the scripts) */
#if defined(IFEQ) && !defined(MIXED)
#define SCRIPTS 0
#else
#define SCRIPTS 1
#endif
/* CONDITIONAL: a store, renewal or release may go by the conditional write */
#ifdef IFEQ
#define CONDITIONAL 1
#else
#define CONDITIONAL 0
#endif
/* Without data loss every write is checked; with it too when no store may
 * go within the lease (nothing else writes over another request's value) */
#if !defined(LOSS) || !SCRIPTS
#define WRITES_CHECKED 1
#else
#define WRITES_CHECKED 0
#endif

/* -------------------------------------------------------------- values */

/* What the key may hold: nothing, request i's claim record (its token and
 * fingerprint), or its stored response — or its unreplayable marker (410),
 * which Redis and the requests treat as a stored response. */
#define EMPTY 0
#define CLAIM(i) (1 + (i))
#define REC(i) (4 + (i))
#define is_claim(v) ((v) >= 1 && (v) <= 3)
#define is_record(v) ((v) >= 4 && (v) <= 6)
#define OOMV 254        /* a reply: refused for memory (OOM), nothing done */
#define OOMKEEP 253     /* (the same, to a renewal for idempotency_ttl: the keep) */
#define owner(v) (((v) - 1) % 3)
#define NEVER 255       /* no expiry: idempotency_ttl outlives every run */
#define NONE 255
#if SCRIPTS
#define CAP (LEASE > RT -> LEASE : RT)  /* ages are counted up to here: beyond, nothing tells them apart */
#else
#define CAP RT          /* (no lease: only the claim's timeout tells ages apart) */
#endif
#define ROOM 0          /* Redis's memory (OOM): room for writes, */
#define FULLMEM 1       /* maxmemory reached with noeviction, */
#define FREED 2         /* room again */

mtype = { SET_NX, RENEW, LEASED_STORE, STORE, RELEASE, RESTORE, SET_IFEQ, RENEW_IFEQ, DEL_IFEQ };
/* the reply to a conditional write comes as the script's would: a store's,
 * a renewal's, a release's */
#define tag(o) (o == SET_IFEQ -> STORE : (o == RENEW_IFEQ -> RENEW : (o == DEL_IFEQ -> RELEASE : o)))

/* ---------------------------------------------------------------- state */

byte kv = EMPTY;        /* the key on the master */
byte kexp = NEVER;      /* its time to live, by Redis's clock */
unsigned seen : 7 = 1;  /* the values the master's key has held (bit v): a replica that lags
                           holds one of them, EMPTY when it never synced */
byte drift;             /* how far Redis's clock has run ahead */
byte losses;            /* failovers that lost writes */
byte lapses;            /* claims that expired while their request held them */
byte executions;        /* requests the upstream received */
byte faults;
byte ended;             /* requests that ended, with nothing owed to Redis */
byte mem = ROOM;        /* Redis's memory (OOM) */
byte fp[N];             /* each request's fingerprint */
bool held[N];           /* granted and not settled: its claim must live */
bool executed[N];
bool awaited[N];        /* its claim's answer is still awaited (not timed out) */
byte age[N];            /* since its last claim (or look) was sent, up to CAP */
byte lage[N];           /* since its leased store in flight was sent (NONE: none) */
byte back[N];           /* the put-back's expiry, as time left (PEXPIRETIME read in the leased store) */
#ifdef OOM
byte refused[N];        /* Redis refused, for memory, a conditional renewal that found the
                           claim (1), and the request read the refusal and did not send the
                           renewal again (2); none has renewed the claim since */
#endif

/* one connection per gateway: commands and replies in order */
chan to_redis[N] = [3] of { mtype, byte, byte };           /* op, value, ttl or value */
chan from_redis[N] = [3] of { mtype, byte, bool };         /* op, value, lost */

#define name(i) (65 + (i))  /* 'A', 'B', 'C' in the trail */

/* -------------------------------------------------------------- Redis */

/* Redis expires a key lazily, when a command touches it. A claim that
 * expires while its request holds it is a lapse: its renewals did not land
 * for lock_ttl (its gateway paused or died, or could not reach Redis). */
inline expire() {
    if
    :: kv != EMPTY && kexp == 0 ->
        if
        :: is_claim(kv) && held[owner(kv)] -> lapses++;
            printf("Redis: %c's claim expired while %c still held it (lapse)\n", name(owner(kv)), name(owner(kv)));
#ifdef OOM
            /* a lapse is a claim whose renewals did not reach Redis in time,
             * never one whose renewal Redis refused and nothing sent again */
            assert(refused[owner(kv)] != 2)
#endif
        :: else -> printf("Redis: the key expired\n")
        fi;
        kv = EMPTY; kexp = NEVER
    :: else
    fi
}

/* Every write goes through here. Without data loss, a stored response (or
 * marker) is never replaced by another value, nor has its life shortened —
 * nor with it, when no store goes within the lease (IFEQ): every write then
 * acts only on the request's own claim. */
inline write(v, e) {
#if WRITES_CHECKED
    assert(!(is_record(kv) && (v != kv || e < kexp)));
#endif
    kv = v; kexp = e; remember()
}

/* (with LOSS: the values a lagging replica may hold) */
inline remember() {
#ifdef LOSS
    if :: losses == 0 -> seen = seen | (1 << kv) :: else fi
#else
    skip
#endif
}

inline reply(i, t, v) {
    if
    :: from_redis[i]!t, v, false
    :: faults < FAULTS -> faults++; from_redis[i]!t, 0, true;
        printf("Redis: ran %c's %e, its reply lost with the connection\n", name(i), op)
    fi
}

/* One command of request i's connection, run atomically, as Redis runs a
 * command, a script or a MULTI/EXEC block. */
inline serve(i) {
    to_redis[i]?op, a, b;
    expire();
    if
    :: faults < FAULTS ->
        /* the connection dropped before Redis read the command: not run */
        faults++;
        if :: op == LEASED_STORE -> lage[i] = NONE :: else fi;
        from_redis[i]!tag(op), 0, true;
        printf("Redis: %c's %e dropped with the connection\n", name(i), op)
    :: true ->
        if
        :: op == SET_NX ->
            /* RedisStore::claim: SET key claim NX PX lock_ttl GET */
            if
            :: mem == FULLMEM -> reply(i, op, OOMV);
                printf("Redis: %c's SET NX refused for memory\n", name(i))
            :: mem != FULLMEM && kv == EMPTY -> write(a, (i < FULL -> L : NEVER)); held[i] = awaited[i]; reply(i, op, EMPTY);
                printf("Redis: SET NX grants %c the claim\n", name(i))
            :: mem != FULLMEM && kv != EMPTY -> reply(i, op, kv);
                printf("Redis: SET NX finds the key taken (%d)\n", kv)
            fi
        :: op == RENEW ->
            /* renew_script: PEXPIRE if the key holds the claim */
            if
            :: kv == CLAIM(i) -> write(kv, b); reply(i, op, 1)
#ifdef OOM
                ; refused[i] = 0
#if CONDITIONAL
                ; if
                :: b == NEVER -> printf("Redis: %c's keep renews its claim for idempotency_ttl\n", name(i))
                :: else
                fi
#endif
#endif
            :: else -> reply(i, op, 0)
            fi
        :: op == LEASED_STORE ->
            /* ScriptCalls::render_store within the lease:
             * MULTI; PEXPIRETIME key; SET key record PX ttl XX GET; EXEC */
            lage[i] = NONE;
#ifndef LOSS
            /* the lease's argument: the store finds its own claim */
            assert(kv == CLAIM(i) || kv == a);
#endif
            back[i] = kexp;
            old = kv;
            if
            :: mem == FULLMEM -> old = OOMV;
                printf("Redis: %c's leased SET XX refused for memory: the transaction is discarded\n", name(i))
            :: mem != FULLMEM && kv != EMPTY -> kv = a; kexp = NEVER; remember();
                printf("Redis: %c's leased SET XX GET replaces %d with %c's record\n", name(i), old, name(i))
            :: mem != FULLMEM && kv == EMPTY -> printf("Redis: %c's leased SET XX finds nothing\n", name(i))
            fi;
            reply(i, op, old)
        :: op == STORE ->
            /* complete_script, the fenced store */
#ifdef NO_FENCE
            if
            :: kv == a -> reply(i, op, 1)
            :: else -> write(a, NEVER); reply(i, op, 1);
                printf("Redis: %c's unfenced store writes %c's record\n", name(i), name(i))
            fi
#else
            if
            :: kv == CLAIM(i) && mem == FULLMEM -> reply(i, op, OOMV);
                printf("Redis: %c's fenced store refused for memory\n", name(i))
            :: kv == CLAIM(i) && mem != FULLMEM -> write(a, NEVER); reply(i, op, 1);
                printf("Redis: %c's fenced store writes %c's record\n", name(i), name(i))
            :: kv == a -> reply(i, op, 1)
            :: else -> reply(i, op, 0);
                printf("Redis: %c's fenced store refused: the key is not its claim\n", name(i))
            fi
#endif
        :: op == RELEASE ->
            /* release_script */
            if
            :: kv == CLAIM(i) -> write(EMPTY, NEVER); reply(i, op, 1);
                printf("Redis: %c's release deletes the key\n", name(i))
            :: kv == EMPTY -> reply(i, op, 1)
            :: else -> reply(i, op, 0)
            fi
        :: op == RESTORE ->
            /* restore_script: put back b, expiring when it did (PXAT), if the
             * key holds our record a */
            if
            :: kv == a && mem == FULLMEM -> reply(i, op, OOMV)
            :: kv == a && mem != FULLMEM ->
#ifdef PUTBACK_LOCK_TTL
                kv = b; kexp = L;
#else
                kv = b; kexp = back[i];
#endif
                remember(); reply(i, op, 1);
                printf("Redis: %c puts back %d, to live %d more ticks\n", name(i), kv, kexp)
            :: kv == b -> reply(i, op, 1)
            :: else -> reply(i, op, 0)
            fi
#if CONDITIONAL
        :: op == RENEW_IFEQ ->
            /* SET key claim IFEQ claim PX lock_ttl: OK (1) or nil (0). A SET:
             * refused while Redis is full, whatever the key holds */
            if
            :: mem == FULLMEM -> reply(i, RENEW, (b == NEVER -> OOMKEEP : OOMV));
#ifdef OOM
                if :: kv == CLAIM(i) -> refused[i] = 1 :: else fi;
#endif
                printf("Redis: %c's SET IFEQ renewal refused for memory\n", name(i))
            :: mem != FULLMEM && kv == CLAIM(i) -> write(kv, b); reply(i, RENEW, 1)
#ifdef OOM
                ; refused[i] = 0
#endif
            :: mem != FULLMEM && kv != CLAIM(i) -> reply(i, RENEW, 0)
            fi
        :: op == SET_IFEQ ->
            old = kv;
#ifdef UNCONDITIONAL
            /* SET key record PX ttl GET: no condition */
            if
            :: mem == FULLMEM -> reply(i, STORE, OOMV);
                printf("Redis: %c's SET refused for memory\n", name(i))
            :: mem != FULLMEM ->
                printf("Redis: %c's unconditional SET replaces %d with %c's record\n", name(i), old, name(i));
                write(a, NEVER); reply(i, STORE, old)
            fi
#else
            /* SET key record IFEQ claim PX ttl GET: written only over our
             * claim; the reply is the old value (our claim: stored; our
             * record: stored already; else not stored). Refused while Redis
             * is full, whatever the key holds */
            if
            :: mem == FULLMEM -> reply(i, STORE, OOMV);
                printf("Redis: %c's SET IFEQ refused for memory\n", name(i))
            :: mem != FULLMEM && kv == CLAIM(i) -> write(a, NEVER); reply(i, STORE, old);
                printf("Redis: %c's SET IFEQ replaces its claim with %c's record\n", name(i), name(i))
            :: mem != FULLMEM && kv != CLAIM(i) -> reply(i, STORE, old);
                printf("Redis: %c's SET IFEQ finds %d, not its claim: nothing written\n", name(i), old)
            fi
#endif
        :: op == DEL_IFEQ ->
            /* DELIFEQ key claim (Valkey), DELEX key IFEQ claim (Redis): 1
             * deleted, else 0; a DEL needs no memory */
            if
            :: kv == CLAIM(i) -> write(EMPTY, NEVER); reply(i, RELEASE, 1);
                printf("Redis: %c's conditional delete deletes the key\n", name(i))
            :: else -> reply(i, RELEASE, 0)
            fi
#endif
        fi
    fi
}

/* (Redis's scratch values, cleared after each command: not part of its state) */
inline forget() { a = 0; b = 0; old = 0 }

active proctype Redis() {
    mtype op;
    byte a, b, old;
end:
    do
    :: atomic { nempty(to_redis[0]) -> serve(0); forget() }
    :: atomic { nempty(to_redis[1]) -> serve(1); forget() }
#if N > 2
    :: atomic { nempty(to_redis[2]) -> serve(2); forget() }
#endif
    :: atomic { losses < MAXLOSS ->
        /* a failover to a replica that missed the last writes, or a restart
         * of an empty master: the key holds an earlier value (a claim of
         * it lives any time up to lock_ttl more) */
        losses++;
        if
        :: kv = EMPTY
        :: seen & 2 -> kv = CLAIM(0)
        :: seen & 4 -> kv = CLAIM(1)
        :: seen & 8 -> kv = CLAIM(2)
        :: seen & 16 -> kv = REC(0)
        :: seen & 32 -> kv = REC(1)
        :: seen & 64 -> kv = REC(2)
        fi;
        seen = 0;
#ifdef OOM
        for (a : 0 .. N - 1) { refused[a] = 0 };
        a = 0;
#endif
        if
        :: is_claim(kv) ->
            if
            :: kexp = 1 :: kexp = 2 :: kexp = 3 :: kexp = L
            fi
        :: else -> kexp = NEVER
        fi;
        printf("Redis: fails over to a replica that missed the last writes: the key holds %d\n", kv) }
#ifdef OOM
    :: atomic { mem == ROOM -> mem = FULLMEM;
        printf("Redis: maxmemory reached (noeviction): writes that need memory are refused\n") }
    :: atomic { mem == FULLMEM -> mem = FREED;
        printf("Redis: memory freed: writes are taken again\n") }
#endif
    od
}

/* ------------------------------------------------------------------ time */

inline count_down(t) { if :: t != NEVER && t > 0 -> t-- :: else fi }
inline grow(t) { if :: t < CAP -> t++ :: else fi }
#ifdef FREE_CLOCKS
inline grow_sent(t) { if :: t != NONE && t < RT -> t++ :: else fi }   /* (not waited for: counted no further) */
#else
inline grow_sent(t) { if :: t != NONE -> t++ :: else fi }
#endif

/* A tick of every clock. It waits for a leased store in flight to run
 * within RT of being sent (assumption 2). A drift tick runs Redis's clock
 * alone, DRIFT ticks at most (assumption 1). With FREE_CLOCKS neither: no
 * tick waits for a store, and Redis's clock runs ahead as far as it likes. */
#ifdef FREE_CLOCKS
#define in_time(i) true
#else
#define in_time(i) (lage[i] == NONE || lage[i] < RT)
#endif
#if N > 2
#define stores_in_time (in_time(0) && in_time(1) && in_time(2))
#else
#define stores_in_time (in_time(0) && in_time(1))
#endif

/* A tick is taken only when it changes something: a run in which every
 * request waits for something that never comes then ends, and SPIN reports
 * it as an invalid end state. */
#define ticks(i) (age[i] < CAP || lage[i] != NONE || (back[i] != NEVER && back[i] > 0))
#define redis_ticks (kexp != NEVER && kexp > 0)
#if N > 2
#define time_matters (ticks(0) || ticks(1) || ticks(2) || redis_ticks)
#define redis_time_matters (redis_ticks || (back[0] != NEVER && back[0] > 0) || (back[1] != NEVER && back[1] > 0) || (back[2] != NEVER && back[2] > 0))
#else
#define time_matters (ticks(0) || ticks(1) || redis_ticks)
#define redis_time_matters (redis_ticks || (back[0] != NEVER && back[0] > 0) || (back[1] != NEVER && back[1] > 0))
#endif

active proctype Clock() {
    byte i;
end:
    do
    :: atomic { stores_in_time && time_matters ->
        for (i : 0 .. N - 1) { grow(age[i]); grow_sent(lage[i]); count_down(back[i]) };
        count_down(kexp); i = 0;
        printf("tick\n") }
#ifdef FREE_CLOCKS
    :: atomic { redis_time_matters ->
#else
    :: atomic { drift < DRIFT && redis_time_matters -> drift++;
#endif
        for (i : 0 .. N - 1) { count_down(back[i]) };
        count_down(kexp); i = 0;
        printf("tick of Redis's clock alone\n") }
    od
}

/* --------------------------------------------------------------- requests */

/* A renewal's or a keepalive's answer (ScriptCalls::on_script_reply): the
 * claim found gone revokes the lease (Lease::revoke). */
#define renewal_answered if :: !rl && x == 0 -> revoked = true :: else fi; x = 0; rl = false

/* A renewal (on_renew), a keepalive ahead of a store sent again, or the keep
 * of a claim whose store Redis refused for memory: renew_script, or the
 * conditional SET ... IFEQ claim PX ttl */
inline renew(ttl) {
#if CONDITIONAL
#if SCRIPTS
    if
    :: to_redis[me]!RENEW, CLAIM(me), ttl
    :: to_redis[me]!RENEW_IFEQ, CLAIM(me), ttl
    fi
#else
    to_redis[me]!RENEW_IFEQ, CLAIM(me), ttl
#endif
#else
    to_redis[me]!RENEW, CLAIM(me), ttl
#endif
}

/* ScriptCalls::on_script_reply: a conditional renewal or keepalive refused
 * for memory goes again at once as the script, whose PEXPIRE a full Redis
 * takes (a renewal by the script is never refused). Without both the
 * conditional write and OOM it is not there at all (not even a skip, which
 * would add a state to every renewal's answer). */
#if CONDITIONAL && defined(OOM)
#define refusal_then refusal();
inline refusal() {
    if
    :: x == OOMV || x == OOMKEEP ->
#ifdef RENEW_NO_FALLBACK
        if :: refused[me] == 1 -> refused[me] = 2 :: else fi
#else
        refused[me] = 0; to_redis[me]!RENEW, CLAIM(me), (x == OOMKEEP -> NEVER : L);
        printf("%c sends its refused renewal again, as the script\n", name(me))
#endif
    :: else
    fi
}
#else
#define refusal_then
#endif

proctype Request(byte me) {
    mtype op;
    byte v, x, rec, tries, looks, renewals;
#ifdef OOM_GIVES_UP
    byte kept_tries;
#endif
    bool lost, rl, revoked, leased;

claim:
    /* claim_start -> RedisStore::claim: SET key claim NX PX lock_ttl GET */
    atomic {
        age[me] = 0; awaited[me] = true;
        to_redis[me]!SET_NX, CLAIM(me), 0;
        printf("%c sends SET NX\n", name(me))
    }
    if
    :: from_redis[me]?SET_NX, v, lost
    :: atomic { me < FULL && age[me] >= RT && empty(from_redis[me]) -> held[me] = false; awaited[me] = false;
        printf("%c: no answer within idempotency_redis_timeout: 503\n", name(me)) }
        /* on_claim_timeout: 503; RedisStore::abandon — on_claim_reply
         * releases a late grant, or a claim whose reply was lost */
        from_redis[me]?SET_NX, v, lost;
        if
        :: lost || v == EMPTY -> goto release
        :: else -> goto done
        fi
    fi;
    awaited[me] = false;
    if
    :: lost -> held[me] = false; goto release   /* on_claim_reply: 503, and the claim it may have been granted released */
    :: !lost && v == OOMV -> printf("%c: 503 (the claim refused for memory)\n", name(me)); goto done
    :: !lost && v == EMPTY -> goto granted
    :: !lost && is_claim(v) ->
        if
        :: looks < LOOKS -> looks++; goto claim   /* wait.cpp: the group looks again */
        :: else -> printf("%c: 409\n", name(me)); goto done
        fi
    :: !lost && is_record(v) ->
        /* keep_stored -> replay (same fingerprint), 410 for a marker, else 422 */
        assert(executed[owner(v)]);
        printf("%c: answered from %c's record or marker (%d)\n", name(me), name(owner(v)), v);
        goto done
    fi;

granted:
    v = 0;
    if
    :: me >= FULL -> atomic {
        /* (a retry that only claims: its claim, written without expiry,
         * stands for one renewed until its response is stored) */
        executed[me] = true; executions++; held[me] = false;
        printf("%c executes (execution %d)\n", name(me), executions);
        assert(executions <= ALLOWED) }
        goto done
    :: else
    fi;
    /* claim_hold: renewals every lock_ttl / 3 */
    if
    :: held[me] = false; goto release
        /* capture.cpp: the verdict says the upstream never got the request -> claim_release */
    :: atomic {
        executed[me] = true; executions++;
        printf("%c executes (execution %d)\n", name(me), executions);
        assert(executions <= ALLOWED)   /* at most once */
       }
    fi;
    do
    :: renewals < RENEWALS -> renewals++; renew(L)   /* on_renew */
    :: from_redis[me]?RENEW, x, rl -> refusal_then renewal_answered
    :: break                              /* the response ends: claim_stop_renewing */
    od;
    /* claim_complete with the record; claim_unreplayable sends the marker
     * down the same path (in the model a marker is a record: Redis and the
     * requests treat both alike, only the client's answer differs) */
    rec = REC(me);
#ifdef RELEASE_EXECUTED
    if
    :: held[me] = false; goto release
    :: skip
    fi;
#endif

store:
    /* ScriptCalls::store -> render_store: the lease is judged as the store
     * leaves, first attempt only; on a server with the conditional write,
     * SET key record IFEQ claim PX ttl GET, every attempt */
    atomic {
#if SCRIPTS
        leased = tries == 0 && !revoked && age[me] < LEASE;
#endif
        if
#if SCRIPTS
        :: leased -> lage[me] = 0; to_redis[me]!LEASED_STORE, rec, 0;
            printf("%c stores within its lease\n", name(me))
        :: !leased -> to_redis[me]!STORE, rec, 0;
            printf("%c stores, fenced\n", name(me))
#endif
#if CONDITIONAL
        :: leased = false; to_redis[me]!SET_IFEQ, rec, 0;
            printf("%c stores by SET IFEQ\n", name(me))
#endif
        fi
    }
    do
    :: from_redis[me]?RENEW, x, rl -> refusal_then renewal_answered
    :: from_redis[me]?LEASED_STORE, v, lost -> break
    :: from_redis[me]?STORE, v, lost -> break
    od;
    if
    :: !lost && v == OOMV -> leased = false; v = 0; goto kept
    :: lost ->
        if
        :: tries + 1 < ATTEMPTS ->
            /* ScriptCalls::failed, then on_retry_timer: a keepalive ahead of
             * the store sent again, fenced */
            tries++;
            renew(L);
            goto store
        :: else -> goto owed_done         /* give_up: the claim expires */
        fi
    :: !lost && v != OOMV && leased -> leased = false;
        /* ScriptCalls::leased_stored */
        if
        :: v == CLAIM(me) || v == rec -> held[me] = false   /* stored */
        :: v == EMPTY -> held[me] = false                   /* gone: nothing written */
        :: is_record(v) && fp[owner(v)] == fp[me] -> held[me] = false   /* same intent: ours stays */
#ifndef PUTBACK_CLAIM
        :: is_claim(v) && v != CLAIM(me) -> held[me] = false
            /* took_claim: another request's claim; ours stays, not put back */
        :: is_record(v) && fp[owner(v)] != fp[me] ->
#else
        :: else ->
#endif
            /* not ours: put back what was there, as it was */
            held[me] = false;
            tries = 0; lost = false;
            goto restore
        fi
    :: else -> held[me] = false; leased = false
        /* the fenced script answered: stored (1) or not (0); SET IFEQ: the
         * old value (our claim: stored; our record: stored already; else not) */
    fi;
    v = 0; lost = false;
    goto owed_done;

kept:
    /* ScriptCalls::keep, then each attempt (probe, send_parked): the claim
     * renewed for what is left of idempotency_ttl from the refusal (beyond
     * every run: no expiry; PEXPIRE needs no memory), then the fenced store
     * again, until it is answered by Redis — stored, or the claim found
     * gone. (A record Redis refused for memory and the marker stored in its
     * place when the worker cannot hold it are the same to the protocol.)
     * The keep is the script on every server: sent as the conditional SET,
     * a full Redis refuses it, and sent again as the script it would land
     * behind the store it was to precede (KEEP_IFEQ) */
#ifdef KEEP_IFEQ
    renew(NEVER);
#else
    to_redis[me]!RENEW, CLAIM(me), NEVER;
#endif
#ifdef OOM_GIVES_UP
    /* the store as it was: attempts within its window, then give_up, the
     * claim left for idempotency_ttl */
    if
    :: kept_tries < ATTEMPTS -> kept_tries++
    :: else -> printf("%c gives the store up: its claim stays for idempotency_ttl\n", name(me)); goto owed_done
    fi;
#endif
#if CONDITIONAL && SCRIPTS
    if
    :: to_redis[me]!STORE, rec, 0
    :: to_redis[me]!SET_IFEQ, rec, 0
    fi;
#elif CONDITIONAL
    to_redis[me]!SET_IFEQ, rec, 0;
#else
    to_redis[me]!STORE, rec, 0;
#endif
    printf("%c keeps its claim for idempotency_ttl and stores again, fenced\n", name(me));
    do
    :: from_redis[me]?RENEW, x, rl -> refusal_then x = 0; rl = false
    :: from_redis[me]?STORE, v, lost -> break
    od;
    if
    :: lost || v == OOMV -> v = 0; lost = false; goto kept   /* parked again */
    :: else -> held[me] = false; v = 0; goto owed_done      /* stored (1), or the claim gone (0) */
    fi;

restore:
    /* restore_script, Role::restore, sent again after a lost reply */
    to_redis[me]!RESTORE, rec, v;
    do
    :: from_redis[me]?RENEW, x, rl -> refusal_then x = 0; rl = false
    :: from_redis[me]?RESTORE, x, lost -> break
    od;
    if
    :: (lost || x == OOMV) && tries + 1 < ATTEMPTS -> x = 0; tries++; goto restore
    :: else -> x = 0
    fi;
    v = 0; lost = false;
    goto owed_done;

release:
    /* claim_release -> release_script, sent again after a lost reply */
    tries = 0; v = 0; lost = false;
release_again:
#if CONDITIONAL
    /* DELIFEQ key claim (Valkey >= 9.0), DELEX key IFEQ claim (Redis >= 8.4) */
#if SCRIPTS
    if
    :: to_redis[me]!RELEASE, CLAIM(me), 0
    :: to_redis[me]!DEL_IFEQ, CLAIM(me), 0
    fi;
#else
    to_redis[me]!DEL_IFEQ, CLAIM(me), 0;
#endif
#else
    to_redis[me]!RELEASE, CLAIM(me), 0;
#endif
    do
    :: from_redis[me]?RENEW, x, rl -> refusal_then x = 0; rl = false
    :: from_redis[me]?RELEASE, x, lost -> x = 0; break
    od;
    if
    :: lost && tries + 1 < ATTEMPTS -> tries++; goto release_again
    :: else
    fi;

owed_done:
    /* what is left on the connection: answers to renewals sent earlier */
    do
    :: from_redis[me]?RENEW, x, rl -> refusal_then x = 0; rl = false
    :: empty(from_redis[me]) && empty(to_redis[me]) -> break
    od;
done:
    atomic {
#ifdef OOM_GIVES_UP
        kept_tries = 0;
#endif
        v = 0; x = 0; rec = 0; tries = 0; looks = 0; renewals = 0; lost = false; rl = false;
#ifdef OOM
        refused[me] = 0;
#endif
        revoked = false; leased = false; back[me] = NEVER; age[me] = CAP; ended++ }
}

/* ----------------------------------------------------- the end of the run */

/* Once every request has ended, nothing is owed to Redis and no claim is
 * left without an expiry: no key stays claimed for ever. With OOM, once
 * Redis takes writes again: a store refused for memory was kept until it
 * landed, not given up with its claim kept for idempotency_ttl. */
active proctype Finish() {
    (ended == N && mem != FULLMEM);
    assert(!is_claim(kv) || kexp != NEVER || owner(kv) >= FULL)
}

init {
    atomic {
        byte i;
#ifdef SAME_FP
        fp[0] = 1;
#else
        fp[0] = 2;
#endif
        fp[1] = 1;
#if N > 2
        fp[2] = 1;
#endif
        for (i : 0 .. N - 1) { lage[i] = NONE; back[i] = NEVER };
        for (i : 0 .. N - 1) { run Request(i) }
    }
}
