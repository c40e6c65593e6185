// live_log.cpp — writing and reading a live log (layout in live_log.hpp).
// Reading trusts nothing and reads a log that may still grow: a frame is
// judged by as much of it as is there — its type and its length as soon as
// they arrive — so a log that can no longer become a valid one is bad at
// once, and a prefix of a valid log never is.
#include "live_log.hpp"

#include <cstring>

#include "big_endian.hpp"

namespace idem {
namespace {

constexpr char start_bytes[live_start_size] = {'I', 'D', 'L', static_cast<char>(live_version)};
constexpr char head_type = 'H';
constexpr char body_type = 'B';
constexpr char end_type = 'E';

char* put_frame_header(char* out, char type, std::size_t length) noexcept
{
    *out++ = type;
    return put_be(out, static_cast<std::uint32_t>(length));
}

bool known_end(std::uint8_t how) noexcept
{
    return how >= static_cast<std::uint8_t>(LiveEnd::complete)
           && how <= static_cast<std::uint8_t>(LiveEnd::cut);
}

}  // namespace

std::size_t encode_live_start(char* out) noexcept
{
    std::memcpy(out, start_bytes, live_start_size);
    return live_start_size;
}

std::size_t live_head_size(const Header* headers, std::size_t count,
                           const ResponseExtras& extras) noexcept
{
    const std::size_t record = response_size(headers, count, 0, extras);
    if (record == 0 || record > live_max_frame_length) {
        return 0;
    }
    return live_frame_overhead + record;
}

std::size_t encode_live_head(char* out, const Digest& fingerprint, std::uint16_t status,
                             const Header* headers, std::size_t count,
                             const ResponseExtras& extras) noexcept
{
    const std::size_t size = live_head_size(headers, count, extras);
    if (size == 0) {
        return 0;
    }
    char* record = put_frame_header(out, head_type, size - live_frame_overhead);
    char* body = encode_response_head(record, fingerprint, status, headers, count, 0, extras);
    encode_response_tail(body, extras);
    return size;
}

char* encode_live_body_header(char* out, std::size_t length) noexcept
{
    if (length == 0 || length > live_max_frame_length) {
        return nullptr;
    }
    return put_frame_header(out, body_type, length);
}

std::size_t encode_live_end(char* out, LiveEnd how) noexcept
{
    char* at = put_frame_header(out, end_type, 1);
    *at = static_cast<char>(how);
    return live_end_size;
}

LiveStep read_live(std::string_view log, std::size_t& pos, LiveReadState& state,
                   LiveItem& out) noexcept
{
    std::size_t at = pos;
    if (at == 0) {
        if (state.head_seen || state.ended) {
            return LiveStep::bad;  // a state that belongs to another read of the log
        }
        const std::size_t have = log.size() < live_start_size ? log.size() : live_start_size;
        if (log.substr(0, have) != std::string_view(start_bytes, have)) {
            return LiveStep::bad;
        }
        if (have < live_start_size) {
            return LiveStep::more;
        }
        at = live_start_size;
    } else if (at < live_start_size || at > log.size()) {
        return LiveStep::bad;  // not where a frame starts
    }

    const std::string_view rest = log.substr(at);
    if (state.ended) {
        return rest.empty() ? LiveStep::more : LiveStep::bad;
    }
    if (rest.empty()) {
        return LiveStep::more;
    }
    const char type = rest[0];
    const bool in_order = type == head_type ? !state.head_seen
                          : type == body_type || type == end_type ? state.head_seen
                          : false;  // a type this version does not know
    if (!in_order) {
        return LiveStep::bad;
    }
    if (rest.size() < live_frame_overhead) {
        return LiveStep::more;
    }
    const std::size_t length = get_be<std::uint32_t>(rest.data() + 1);
    if (length > live_max_frame_length || (type == body_type && length == 0)
        || (type == end_type && length != 1)) {
        return LiveStep::bad;
    }
    if (rest.size() - live_frame_overhead < length) {
        return LiveStep::more;
    }
    const std::string_view payload = rest.substr(live_frame_overhead, length);

    LiveItem item;
    if (type == head_type) {
        const std::optional<Record> head = decode_record(payload);
        if (!head || head->kind != RecordKind::response || !head->body.empty()) {
            return LiveStep::bad;
        }
        item.kind = LiveItem::Kind::head;
        item.head = *head;
    } else if (type == body_type) {
        item.kind = LiveItem::Kind::body;
        item.body = payload;
    } else {
        const auto how = static_cast<std::uint8_t>(payload[0]);
        if (!known_end(how)) {
            return LiveStep::bad;
        }
        item.kind = LiveItem::Kind::end;
        item.how = static_cast<LiveEnd>(how);
    }

    out = item;
    state.head_seen = true;
    state.ended = item.kind == LiveItem::Kind::end;
    pos = at + live_frame_overhead + length;
    return LiveStep::item;
}

}  // namespace idem
