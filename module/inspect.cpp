// inspect.cpp — see inspect.hpp.

#include "inspect.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstring>
#include <ctime>

#include "claim_token.hpp"
#include "compression.hpp"
#include "fingerprint.hpp"
#include "record.hpp"
#include "replayable.hpp"
#include "seal.hpp"

namespace idem {
namespace {

// Once full, stays failed.
class Json {
public:
    Json(char* out, std::size_t room) noexcept : out_(out), room_(room) {}

    Json& raw(std::string_view s) noexcept
    {
        if (ok_ && s.size() <= room_ - used_) {
            std::memcpy(out_ + used_, s.data(), s.size());
            used_ += s.size();
        } else {
            ok_ = false;
        }
        return *this;
    }

    Json& field(std::string_view name) noexcept
    {
        raw(first_ ? "" : ",").raw("\"").raw(name).raw("\":");
        first_ = false;
        return *this;
    }

    Json& open(std::string_view name = {}) noexcept
    {
        if (!name.empty()) {
            field(name);
        }
        first_ = true;
        return raw("{");
    }

    Json& close() noexcept
    {
        first_ = false;
        return raw("}");
    }

    Json& string(std::string_view s) noexcept
    {
        raw("\"");
        for (unsigned char c : s) {
            if (c == '"' || c == '\\') {
                char esc[2] = {'\\', static_cast<char>(c)};
                raw({esc, 2});
            } else if (c < 0x20 || c >= 0x7f) {
                char esc[7];
                std::snprintf(esc, sizeof esc, "\\u%04x", c);
                raw({esc, 6});
            } else {
                raw({reinterpret_cast<const char*>(&c), 1});
            }
        }
        return raw("\"");
    }

    Json& number(std::int64_t n) noexcept
    {
        char digits[24];
        int len = std::snprintf(digits, sizeof digits, "%lld", static_cast<long long>(n));
        return raw({digits, static_cast<std::size_t>(len)});
    }

    Json& boolean(bool b) noexcept { return raw(b ? "true" : "false"); }
    Json& null() noexcept { return raw("null"); }

    Json& time(std::uint64_t unix_ms) noexcept
    {
        std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
        std::tm tm{};
        if (gmtime_r(&secs, &tm) == nullptr) {
            return null();
        }
        char text[40];
        std::size_t len = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
        len += static_cast<std::size_t>(std::snprintf(text + len, sizeof text - len, ".%03uZ",
                                                      static_cast<unsigned>(unix_ms % 1000)));
        return string({text, len});
    }

    std::size_t done() const noexcept { return ok_ ? used_ : 0; }

private:
    char* out_;
    std::size_t room_;
    std::size_t used_ = 0;
    bool ok_ = true;
    bool first_ = true;
};

// Keyed with a deployment secret, 8 bytes in hex: enough to tell requests
// apart, and no digest anyone could look up (the fingerprint is an unsalted
// SHA-256). Without a key, nothing is shown.
void fingerprint_field(Json& j, const Digest& fingerprint, std::string_view key)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (key.empty()
        || HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), fingerprint.data(), fingerprint.size(), mac,
                &mac_len) == nullptr
        || mac_len < 8) {
        return;
    }
    char hex[17];
    to_hex(mac, 8, hex);
    j.field("fingerprint").string({hex, 16});
}

struct Judgement {
    KeyState state = KeyState::absent;
    NotJudged why = NotJudged::no;
    bool sealed = false;
    std::optional<CompressedHead> compressed;
    std::optional<Record> record;
};

Judgement judge(std::optional<std::string_view> value, const InspectFacts& facts) noexcept
{
    Judgement v;
    v.state = key_state(value);
    if (!value) {
        return v;
    }
    if (v.state == KeyState::foreign && seal_remnant(*value, facts.seal_keys, facts.seal_key_count)) {
        v.state = KeyState::unusable;  // a sealed record cut short or with its magic altered: 410 (decide.cpp)
        return v;
    }
    v.sealed = is_sealed(*value);
    if (v.sealed) {
        return v;  // never opened here: only its size is told
    }
    if (v.state == KeyState::unjudged) {
        v.why = NotJudged::later_release;
        return v;
    }
    v.compressed = compressed_head(*value);
    if (v.compressed) {
        if (!facts.opened) {
            v.why = facts.not_opened;
            v.state = v.why != NotJudged::no ? KeyState::unjudged : KeyState::unusable;
            return v;
        }
        v.record = decode_record(*facts.opened);
        if (!v.record) {
            v.state = KeyState::unusable;
            return v;
        }
    } else {
        v.record = decode_record(*value);
    }
    Unusable why = Unusable::no;
    if (v.state == KeyState::stored && v.record
        && decide_limits(Outcome::replayed, *v.record, facts.limits, why) != Outcome::replayed) {
        v.state = KeyState::unjudged;
        v.why = NotJudged::too_large;
    }
    return v;
}

std::string_view not_judged_reason(NotJudged why) noexcept
{
    switch (why) {
    case NotJudged::no: return "";
    case NotJudged::dictionary:
        return "compressed with a dictionary this location's idempotency_compress_dictionary lacks";
    case NotJudged::too_large:
        return "larger than this location's idempotency_max_response_size (or pieces over its idempotency_piece_size)";
    case NotJudged::later_release: return "a record of a later release's layout";
    }
    return "";
}

constexpr std::string_view other_request = "; the same key with another method, URI or body gets 422";

void claim_fields(Json& j, const Record& record, const InspectFacts& facts)
{
    std::optional<Holder> holder = read_holder(record.token);
    j.open("claim");
    if (!holder) {
        j.field("holder").null();  // a claim of an older release, or not a gateway's
    } else {
        j.field("gateway").string(holder->host);
        j.field("worker_pid").number(holder->pid);
        j.field("claimed_at").time(holder->claimed_at_ms);
        j.field("lock_ttl_ms").number(holder->lock_ttl_ms);
        // each renewal sets the claim's life to lock_ttl from then
        if (facts.ttl_ms >= 0 && holder->lock_ttl_ms != 0
            && facts.now_ms + static_cast<std::uint64_t>(facts.ttl_ms) >= holder->lock_ttl_ms) {
            std::uint64_t renewed = facts.now_ms + static_cast<std::uint64_t>(facts.ttl_ms) - holder->lock_ttl_ms;
            j.field("last_renewal").time(renewed > holder->claimed_at_ms ? renewed : holder->claimed_at_ms);
        }
    }
    j.close();
    if (holder) {
        j.field("created_at").time(holder->claimed_at_ms);
    }
}

// As the inspecting location's settings answer it.
void next_request(Json& j, KeyState state, const Record* record, bool sealed, const InspectFacts& facts)
{
    char text[512];
    int len = 0;
    switch (state) {
    case KeyState::absent:
        len = std::snprintf(text, sizeof text, "forwarded to the upstream: a first execution");
        break;
    case KeyState::claimed:
        if (facts.wait_ms != 0) {
            len = std::snprintf(text, sizeof text,
                                "waits up to %llu ms for the original in flight (joining its response once it "
                                "streams), then gets its response, or 409 if it has not ended%.*s",
                                static_cast<unsigned long long>(facts.wait_ms), int(other_request.size()),
                                other_request.data());
        } else {
            len = std::snprintf(text, sizeof text, "409 with Retry-After: the original is in flight%.*s",
                                int(other_request.size()), other_request.data());
        }
        break;
    case KeyState::stored:
        if (sealed && !facts.sealing) {
            len = std::snprintf(text, sizeof text,
                                "410 response-unverifiable: the record is sealed and no idempotency_encrypt_key "
                                "is configured to open it");
        } else if (sealed) {
            len = std::snprintf(text, sizeof text,
                                "replayed without reaching the upstream if it opens with a configured "
                                "idempotency_encrypt_key, else 410 response-unverifiable%.*s",
                                int(other_request.size()), other_request.data());
        } else if (facts.sealing) {
            len = std::snprintf(text, sizeof text,
                                "410 response-unverifiable: a plain record where idempotency_encrypt_key "
                                "requires sealing");
        } else {
            len = std::snprintf(text, sizeof text, "replayed (status %u) without reaching the upstream%.*s",
                                unsigned(record->status), int(other_request.size()), other_request.data());
        }
        break;
    case KeyState::unreplayable:
        len = std::snprintf(text, sizeof text,
                            "410: the request was executed and its response cannot be replayed%.*s",
                            int(other_request.size()), other_request.data());
        break;
    case KeyState::unusable:
        len = std::snprintf(text, sizeof text,
                            "410 response-unverifiable: the record holds a response no gateway replays (damaged "
                            "or cut short, a status or header no gateway stores, or a compressed record that does "
                            "not open)");
        break;
    case KeyState::foreign:
        len = std::snprintf(text, sizeof text, "503: the value is not a record of this module");
        break;
    case KeyState::unjudged:
        len = std::snprintf(text, sizeof text,
                            "not judged here: a location whose settings open it (or a later release) replays it "
                            "without reaching the upstream, another answers 410 response-unverifiable; it is "
                            "purged only with force=1");
        break;
    }
    j.field("next_request").string({text, len > 0 ? static_cast<std::size_t>(len) : 0});
}

}  // namespace

std::string_view key_state_name(KeyState state) noexcept
{
    switch (state) {
    case KeyState::absent: return "absent";
    case KeyState::claimed: return "claimed";
    case KeyState::stored: return "stored";
    case KeyState::unreplayable: return "unreplayable";
    case KeyState::unusable: return "unusable";
    case KeyState::foreign: return "foreign";
    case KeyState::unjudged: return "unjudged";
    }
    return "";
}

KeyState key_state(std::optional<std::string_view> value) noexcept
{
    if (!value) {
        return KeyState::absent;
    }
    if (is_sealed(*value)) {
        return KeyState::stored;  // a claim is never sealed: a response, or its 410 marker
    }
    RecordFlaw flaw = RecordFlaw::none;
    std::optional<Record> record = decode_record(*value, &flaw);
    if (flaw == RecordFlaw::compressed && compressed_head(*value, &flaw)) {
        return KeyState::stored;
    }
    if (!record) {
        // a later release's record may be replayed by a gateway of that release
        return flaw == RecordFlaw::newer_version ? KeyState::unjudged
               : flaw != RecordFlaw::none        ? KeyState::unusable
                                                 : KeyState::foreign;
    }
    switch (record->kind) {
    case RecordKind::claim: return KeyState::claimed;
    case RecordKind::response: return KeyState::stored;
    case RecordKind::unreplayable: return KeyState::unreplayable;
    }
    return KeyState::foreign;
}

KeyState judged_state(std::optional<std::string_view> value, const InspectFacts& facts) noexcept
{
    return judge(value, facts).state;
}

std::size_t inspection_json(std::optional<std::string_view> value, const InspectFacts& facts, char* out,
                            std::size_t room) noexcept
{
    const Judgement v = judge(value, facts);
    const KeyState state = v.state;
    const bool sealed = v.sealed;
    const std::optional<CompressedHead>& compressed = v.compressed;
    const std::optional<Record>& record = v.record;

    Json j(out, room);
    j.open();
    j.field("key_hash").string(facts.key_hash);
    j.field("store").string(facts.store);
    j.field("state").string(key_state_name(state));
    if (value) {
        j.field("encrypted").boolean(sealed);
        j.field("record_bytes").number(static_cast<std::int64_t>(value->size()));
        if (!sealed) {  // a sealed record may be compressed inside: not told
            j.field("compressed").boolean(compressed.has_value());
        }
        if (compressed) {
            j.field("plain_bytes").number(static_cast<std::int64_t>(compressed->plain_size));
            if (std::uint32_t dictionary = frame_dictionary(compressed->frame)) {
                j.field("dictionary_id").number(dictionary);
            }
        }
        if (facts.ttl_ms >= 0) {
            j.field("expires_at").time(facts.now_ms + static_cast<std::uint64_t>(facts.ttl_ms));
            j.field("ttl_ms").number(facts.ttl_ms);
        } else {
            j.field("expires_at").null();
        }
    }
    if (state == KeyState::unjudged) {
        j.field("not_judged_here").string(not_judged_reason(v.why));
    }
    if (record) {
        fingerprint_field(j, record->fingerprint, facts.fingerprint_key);
    }
    if (state == KeyState::claimed && record) {
        claim_fields(j, *record, facts);
    }
    if ((state == KeyState::stored || state == KeyState::unjudged) && record) {
        j.open("response");
        j.field("status").number(record->status);
        j.field("headers").number(record->header_count);
        bool pieces = record->pieces.count != 0;
        j.field("body_bytes").number(static_cast<std::int64_t>(pieces ? record->pieces.body_size : record->body.size()));
        j.field("trailers").number(record->trailer_count);
        if (pieces) {  // kept in pieces under keys of their own (pieces.hpp)
            j.field("pieces").number(record->pieces.count);
            j.field("piece_size").number(record->pieces.size);
        }
        j.close();
    }
    if (state == KeyState::unreplayable && record) {
        j.open("unreplayable");
        j.field("status").number(record->status);
        // what the marker says, when it does (replayable.hpp); else what a marker may stand for
        const char* said = marker_reason(record->why);
        j.field("why").string(said != nullptr ? said
                                              : "executed, but not kept for replay: larger than "
                                                "idempotency_max_response_size, more headers than a record holds, "
                                                "cut off by the upstream, or no room in the store");
        j.close();
    }
    if ((state == KeyState::stored || state == KeyState::unjudged || state == KeyState::unreplayable) && facts.ttl_ms >= 0
        && facts.ttl_conf_ms != 0) {
        // a record does not keep when it was stored: about its expiry less
        // the idempotency_ttl it was most likely stored with
        std::uint64_t expires = facts.now_ms + static_cast<std::uint64_t>(facts.ttl_ms);
        if (expires >= facts.ttl_conf_ms) {
            j.field("created_at").time(expires - facts.ttl_conf_ms);
            j.field("created_at_estimated").boolean(true);
        }
    }
    next_request(j, state, record ? &*record : nullptr, sealed, facts);
    j.close();
    return j.done();
}

}  // namespace idem
