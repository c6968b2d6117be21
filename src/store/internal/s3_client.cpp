#include "store/internal/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <thread>

#include "common/cancel.h"
#include "common/text.h"
#include "common/trace.h"

namespace wanbackup::pipeline::internal {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxResponse = 16u << 20;

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

// The digest `md` of the data, raw bytes.
std::string Digest(const EVP_MD* md, const uint8_t* data, size_t size) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, out, &len, md, nullptr) != 1) return {};
  return {reinterpret_cast<const char*>(out), len};
}

std::string Base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

S3Outcome::Transport TransportOf(CURLcode code) {
  using T = S3Outcome::Transport;
  switch (code) {
    case CURLE_OK:
      return T::kNone;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return T::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return T::kTimeout;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return T::kConnLost;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
      return T::kTls;
    default:
      return T::kOther;
  }
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;

// One attempt of one request in flight: its easy handle and what its callbacks need.
struct Transfer {
  S3Request* request = nullptr;
  int attempt = 1;
  Easy easy;
  Slist headers;
  size_t body_sent = 0;
  uint64_t skip = 0;  // bytes of the answer before the range (a 200 to a ranged GET)
  bool range_checked = false;
  std::string error_body;
  char error[CURL_ERROR_SIZE] = {};
  std::chrono::steady_clock::time_point started;  // for WANBACKUP_TRACE
};

const char* MethodName(S3Request::Method method) {
  switch (method) {
    case S3Request::Method::kGet:
      return "GET";
    case S3Request::Method::kPut:
      return "PUT";
    case S3Request::Method::kPost:
      return "POST";
    case S3Request::Method::kDelete:
      return "DELETE";
    case S3Request::Method::kHead:
      return "HEAD";
  }
  return "?";
}

long ResponseCode(CURL* easy) {
  long code = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

size_t OnWrite(char* data, size_t, size_t size, void* user) {
  auto* t = static_cast<Transfer*>(user);
  S3Request* r = t->request;
  const long code = ResponseCode(t->easy.get());
  if (code >= 300 || r->range_out == nullptr) {
    std::string& sink = code >= 300 ? t->error_body : r->response;
    if (sink.size() + size > kMaxResponse) return 0;  // aborts: more than any answer we read
    sink.append(data, size);
    return size;
  }
  if (!t->range_checked) {
    t->range_checked = true;
    t->skip = code == 200 ? r->range_offset : 0;  // the service sent the whole object
  }
  size_t used = 0;
  if (t->skip > 0) {
    used = static_cast<size_t>(std::min<uint64_t>(t->skip, size));
    t->skip -= used;
  }
  const size_t room = r->range_size - r->received;
  const size_t take = std::min(size - used, room);
  std::memcpy(r->range_out + r->received, data + used, take);
  r->received += take;
  return size;  // bytes past the range (a 200) are dropped
}

size_t OnRead(char* buffer, size_t, size_t size, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = std::min(size, t->request->body_size - t->body_sent);
  if (n > 0) std::memcpy(buffer, t->request->body + t->body_sent, n);
  t->body_sent += n;
  return n;
}

int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > t->request->body_size) {
    return CURL_SEEKFUNC_FAIL;
  }
  t->body_sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t OnHeader(char* data, size_t, size_t size, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size);
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(" \t"));
  value.erase(value.find_last_not_of(" \t\r\n") + 1);
  if (name == "etag") t->request->etag = value;
  if (name == "content-length")
    t->request->content_length = std::strtoull(value.c_str(), nullptr, 10);
  return size;
}

std::once_flag curl_init_once;

struct Waiting {
  S3Request* request;
  int attempt;
  Clock::time_point not_before;
};

// One Run's requests: those waiting to start (or for their next attempt) and those in flight.
struct RunState {
  std::string what;
  uint64_t retries = 0;
  std::deque<Waiting> waiting;
  std::map<CURL*, std::unique_ptr<Transfer>> active;
  Status failure;
};

}  // namespace

std::string S3Escape(const std::string& text, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

struct S3Client::Impl {
  S3Location location;
  S3Credentials credentials;
  S3Options options;
  std::string sigv4;  // "aws:amz:REGION:s3"
  CURLM* multi = nullptr;
  std::mt19937 jitter{std::random_device{}()};

  ~Impl() {
    if (multi != nullptr) curl_multi_cleanup(multi);
  }

  std::string Url(const S3Request& r) const {
    std::string url = location.Endpoint() + "/" + location.bucket;
    if (!r.key.empty()) url += "/" + S3Escape(r.key, true);
    if (!r.query.empty()) url += "?" + r.query;
    return url;
  }

  S3RetryPolicy Policy() const {
    return {options.max_attempts, options.first_backoff, std::chrono::milliseconds(10'000)};
  }

  Slist Headers(const S3Request& r) const;
  Status Setup(Transfer* t) const;
  void Finish(Transfer* t, CURLcode code) const;
  Status RunAll(const std::vector<S3Request*>& requests, const std::string& what,
                std::atomic<uint64_t>* retries);
  void StartReady(RunState* st);
  void Collect(RunState* st);
  void Wait(const RunState& st);
};

Slist S3Client::Impl::Headers(const S3Request& r) const {
  static const std::string kEmptySha256 =
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  const bool has_body = r.method == S3Request::Method::kPut || r.method == S3Request::Method::kPost;
  std::vector<std::string> lines;
  if (has_body) {
    const std::string sha = Digest(EVP_sha256(), r.body, r.body_size);
    lines.push_back("x-amz-content-sha256: " +
                    Hex(reinterpret_cast<const unsigned char*>(sha.data()), sha.size()));
    lines.push_back("Content-MD5: " + Base64(Digest(EVP_md5(), r.body, r.body_size)));
    lines.emplace_back("Content-Type: application/octet-stream");
  } else {
    lines.push_back("x-amz-content-sha256: " + kEmptySha256);
  }
  if (r.create_only) lines.emplace_back("If-None-Match: *");
  if (r.range_out != nullptr && r.range_size > 0) {
    lines.push_back("Range: bytes=" + std::to_string(r.range_offset) + "-" +
                    std::to_string(r.range_offset + r.range_size - 1));
  }
  Slist list;
  for (const std::string& line : lines) {
    curl_slist* grown = curl_slist_append(list.get(), line.c_str());
    if (grown == nullptr) return {};
    (void)list.release();
    list.reset(grown);
  }
  return list;
}

Status S3Client::Impl::Setup(Transfer* t) const {
  S3Request& r = *t->request;
  t->easy.reset(curl_easy_init());
  CURL* e = t->easy.get();
  if (e == nullptr) return Status::Internal("curl_easy_init failed");
  t->headers = Headers(r);
  if (!t->headers) return Status::Internal("out of memory building S3 headers");
  const std::string url = Url(r);
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(e, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  curl_easy_setopt(e, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers.get());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout.count()));
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  // Do not wait for "100 Continue" before a body: it costs a round trip per PUT. (Removing the
  // Expect header with "Expect:" instead would have libcurl 7.88 sign a header it never sends.)
  curl_easy_setopt(e, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  switch (r.method) {
    case S3Request::Method::kGet:
      break;
    case S3Request::Method::kHead:
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
      break;
    case S3Request::Method::kDelete:
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
      break;
    case S3Request::Method::kPut:
    case S3Request::Method::kPost:
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body_size));
      curl_easy_setopt(e, CURLOPT_READFUNCTION, OnRead);
      curl_easy_setopt(e, CURLOPT_READDATA, t);
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, OnSeek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, t);
      if (r.method == S3Request::Method::kPost) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "POST");
      break;
  }
  return Status::Ok();
}

// Fills the request's outcome from how its transfer ended.
void S3Client::Impl::Finish(Transfer* t, CURLcode code) const {
  S3Outcome& o = t->request->outcome;
  o = S3Outcome{};
  o.transport = TransportOf(code);
  if (o.transport != S3Outcome::Transport::kNone) {
    o.detail = t->error[0] != '\0' ? t->error : curl_easy_strerror(code);
    return;
  }
  o.http_status = ResponseCode(t->easy.get());
  if (o.http_status >= 300) {
    o.error_code = XmlElement(t->error_body, "Code").value_or("");
    o.detail = XmlElement(t->error_body, "Message").value_or("");
  }
}

struct S3Client::Slot {
  std::mutex mu;
  std::unique_ptr<Impl> impl;  // GUARDED_BY(mu)
};

S3Client::S3Client(const S3Location& location, size_t part_size)
    : location_(location), part_size_(std::max<size_t>(part_size, 5u << 20)) {}

S3Client::~S3Client() = default;

Result<std::unique_ptr<S3Client>> S3Client::Create(const S3Location& location,
                                                   S3Credentials credentials,
                                                   const S3Options& options) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<S3Client> client(new S3Client(location, options.part_size));
  client->parallel_uploads_ = options.parallel_uploads;
  const long connections = std::max(1, options.max_in_flight);
  for (int i = 0; i < std::max(1, options.parallel_calls); ++i) {
    auto impl = std::make_unique<Impl>();
    impl->location = location;
    impl->sigv4 = "aws:amz:" + credentials.region + ":s3";
    impl->credentials.access_key_id = credentials.access_key_id;
    impl->credentials.secret_access_key = credentials.secret_access_key.Clone();
    impl->credentials.region = credentials.region;
    impl->options = options;
    impl->multi = curl_multi_init();
    if (impl->multi == nullptr) return Status::Internal("curl_multi_init failed");
    curl_multi_setopt(impl->multi, CURLMOPT_MAX_HOST_CONNECTIONS, connections);
    curl_multi_setopt(impl->multi, CURLMOPT_MAXCONNECTS, connections);
    client->slots_.push_back(std::make_unique<Slot>());
    client->slots_.back()->impl = std::move(impl);
  }
  return client;
}

Status S3Client::Impl::RunAll(const std::vector<S3Request*>& requests, const std::string& what,
                              std::atomic<uint64_t>* retries) {
  RunState st;
  st.what = what;
  for (S3Request* r : requests)
    st.waiting.push_back({r, 1, Clock::now()});
  while (!st.waiting.empty() || !st.active.empty()) {
    if (CancellationRequested() && st.failure.ok()) {
      st.failure = Status::Cancelled(what + ": interrupted");
    }
    StartReady(&st);
    if (st.active.empty() && st.waiting.empty()) break;
    int running = 0;
    curl_multi_perform(multi, &running);
    Collect(&st);
    Wait(st);
  }
  for (auto& [easy, t] : st.active)
    curl_multi_remove_handle(multi, easy);
  *retries += st.retries;
  return st.failure;
}

// Starts every waiting request whose backoff has passed, while fewer than max_in_flight run.
void S3Client::Impl::StartReady(RunState* st) {
  if (!st->failure.ok()) st->waiting.clear();
  const size_t limit = static_cast<size_t>(std::max(1, options.max_in_flight));
  const Clock::time_point now = Clock::now();
  for (auto it = st->waiting.begin(); it != st->waiting.end() && st->active.size() < limit;) {
    if (it->not_before > now) {
      ++it;
      continue;
    }
    auto t = std::make_unique<Transfer>();
    t->request = it->request;
    t->attempt = it->attempt;
    t->request->received = 0;
    t->request->response.clear();
    t->request->etag.clear();
    if (Status s = Setup(t.get()); !s.ok()) {
      st->failure = s;
      st->waiting.clear();
      return;
    }
    t->started = Clock::now();
    curl_multi_add_handle(multi, t->easy.get());
    CURL* key = t->easy.get();
    st->active.emplace(key, std::move(t));
    it = st->waiting.erase(it);
  }
}

// Takes every finished transfer: a success is done, a transient failure waits for its next
// attempt, anything else is the run's failure (the first one is kept).
void S3Client::Impl::Collect(RunState* st) {
  const S3RetryPolicy policy = Policy();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    CURL* easy = m->easy_handle;
    const CURLcode code = m->data.result;
    auto node = st->active.extract(easy);
    curl_multi_remove_handle(multi, easy);
    if (node.empty()) continue;
    Transfer* t = node.mapped().get();
    Finish(t, code);
    S3Request* r = t->request;
    WB_TRACE("s3: %s %s%s%s -> %ld%s%s (%zu+%zu bytes, %.1f ms, attempt %d)", MethodName(r->method),
             r->key.c_str(), r->query.empty() ? "" : "?", r->query.c_str(), r->outcome.http_status,
             r->outcome.detail.empty() ? "" : " ", EscapeForTerminal(r->outcome.detail).c_str(),
             r->body_size, r->received + r->response.size(),
             std::chrono::duration<double, std::milli>(Clock::now() - t->started).count(),
             t->attempt);
    if (S3Succeeded(r->outcome)) continue;
    if (st->failure.ok() && S3ShouldRetry(policy, t->attempt, r->outcome)) {
      const int next = t->attempt + 1;
      st->waiting.push_back({r, next, Clock::now() + S3Backoff(policy, next, unit(jitter))});
      ++st->retries;
      continue;
    }
    if (st->failure.ok()) st->failure = S3OutcomeStatus(r->outcome, st->what);
  }
}

// Waits for socket activity, at most a second (cancellation is checked that often) and no
// longer than the earliest retry is due.
void S3Client::Impl::Wait(const RunState& st) {
  const Clock::time_point now = Clock::now();
  std::chrono::milliseconds wait(1000);
  for (const Waiting& w : st.waiting) {
    const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(w.not_before - now);
    wait = std::clamp(until, std::chrono::milliseconds(0), wait);
  }
  if (!st.active.empty()) {
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait.count()), nullptr);
  } else if (!st.waiting.empty()) {
    std::this_thread::sleep_for(wait);
  }
}

Status S3Client::Run(const std::vector<S3Request*>& requests, const std::string& what) {
  // A free multi handle if there is one, else wait for the next in turn.
  for (const std::unique_ptr<Slot>& slot : slots_) {
    std::unique_lock<std::mutex> lock(slot->mu, std::try_to_lock);
    if (lock.owns_lock()) return slot->impl->RunAll(requests, what, &retries_);
  }
  Slot& slot = *slots_[next_slot_.fetch_add(1) % slots_.size()];
  std::lock_guard<std::mutex> lock(slot.mu);
  return slot.impl->RunAll(requests, what, &retries_);
}

Status S3Client::RunOne(S3Request* request, const std::string& what) {
  return Run({request}, what);
}

std::string S3Client::Describe(const std::string& key) const {
  return "s3:" + location_.Endpoint() + "/" + location_.bucket + "/" + key;
}

}  // namespace wanbackup::pipeline::internal
