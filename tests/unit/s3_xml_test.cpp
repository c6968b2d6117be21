#include "store/internal/s3_xml.h"

#include <catch2/catch.hpp>

using namespace wanbackup::pipeline::internal;

TEST_CASE("s3 xml: a ListObjectsV2 page gives keys, sizes, times and the next token", "[s3][xml]") {
  const std::string xml =
      R"(<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">)"
      R"(<Name>bkt</Name><Prefix>p/</Prefix><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>)"
      R"(<Contents><Key>p/a&amp;b</Key><LastModified>2026-11-28T05:51:56.380Z</LastModified>)"
      R"(<ETag>&quot;b1946ac9&quot;</ETag><Size>6</Size><StorageClass>STANDARD</StorageClass></Contents>)"
      R"(<Contents><Key>p/c</Key><LastModified>1970-01-01T00:00:01Z</LastModified><Size>0</Size></Contents>)"
      R"(<NextContinuationToken>p/c&lt;1</NextContinuationToken><KeyCount>2</KeyCount></ListBucketResult>)";
  std::optional<S3ListPage> page = ParseListPage(xml);
  REQUIRE(page);
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].key == "p/a&b");
  CHECK(page->objects[0].size == 6);
  CHECK(page->objects[0].mtime_ns == 1795845116380000000);
  CHECK(page->objects[1].key == "p/c");
  CHECK(page->objects[1].mtime_ns == 1000000000);
  CHECK(page->truncated);
  CHECK(page->next_token == "p/c<1");
}

TEST_CASE("s3 xml: the last page has no token and an empty listing no objects", "[s3][xml]") {
  std::optional<S3ListPage> page = ParseListPage(
      "<ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>");
  REQUIRE(page);
  CHECK(page->objects.empty());
  CHECK_FALSE(page->truncated);
}

TEST_CASE("s3 xml: what is no listing, or a listing missing a size, is refused", "[s3][xml]") {
  CHECK_FALSE(ParseListPage("<Error><Code>AccessDenied</Code></Error>"));
  CHECK_FALSE(
      ParseListPage("<ListBucketResult><Contents><Key>k</Key>"
                    "<LastModified>2026-01-01T00:00:00Z</LastModified></Contents>"
                    "</ListBucketResult>"));
  CHECK_FALSE(
      ParseListPage("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"));
}

TEST_CASE("s3 xml: an error body gives its code and message", "[s3][xml]") {
  const std::string xml =
      "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
      "<Message>no &apos;match&apos;</Message><RequestId>tx1</RequestId></Error>";
  CHECK(XmlElement(xml, "Code") == "SignatureDoesNotMatch");
  CHECK(XmlElement(xml, "Message") == "no 'match'");
  CHECK_FALSE(XmlElement(xml, "Cod"));
  CHECK(XmlElement("<Code/>", "Code") == "");
}

TEST_CASE("s3 xml: malformed times are refused", "[s3][xml]") {
  CHECK_FALSE(ParseIso8601("2026-11-28 05:51:56Z"));
  CHECK_FALSE(ParseIso8601("2026-11-28T05:51:56"));
  CHECK_FALSE(ParseIso8601("2026-11-28T05:51:56.Z"));
  CHECK(ParseIso8601("2026-11-28T05:51:56.123456789Z") == 1795845116123456789);
}

TEST_CASE("s3 xml: a page of unfinished uploads gives each key and id, and the next markers",
          "[s3][xml]") {
  std::optional<S3UploadsPage> page = ParseUploadsPage(
      "<?xml version=\"1.0\"?><ListMultipartUploadsResult><Bucket>b</Bucket>"
      "<NextKeyMarker>p/b</NextKeyMarker><NextUploadIdMarker>2~y</NextUploadIdMarker>"
      "<IsTruncated>true</IsTruncated>"
      "<Upload><Key>p/a&amp;1</Key><UploadId>2~x</UploadId></Upload>"
      "<Upload><Key>p/b</Key><UploadId>2~y</UploadId><Initiated>x</Initiated></Upload>"
      "</ListMultipartUploadsResult>");
  REQUIRE(page);
  REQUIRE(page->uploads.size() == 2);
  CHECK(page->uploads[0].key == "p/a&1");
  CHECK(page->uploads[0].upload_id == "2~x");
  CHECK(page->uploads[1].upload_id == "2~y");
  CHECK(page->truncated);
  CHECK(page->next_key_marker == "p/b");
  CHECK(page->next_upload_id_marker == "2~y");
  CHECK_FALSE(ParseUploadsPage("<ListBucketResult></ListBucketResult>"));
  CHECK_FALSE(ParseUploadsPage(
      "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>"));
  CHECK_FALSE(ParseUploadsPage(
      "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated></ListMultipartUploadsResult>"));
}
