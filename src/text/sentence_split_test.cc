// SplitSentences (text/sentence_split.h): the sentence ends, the exceptions (abbreviations, initials,
// numbers), CJK, the length cap, and hostile input (1 MB without punctuation, only punctuation, invalid
// UTF-8). The expected pieces are written out by hand.
#include "text/sentence_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lfmvox::text {
namespace {

using V = std::vector<std::string>;

V Split(std::string_view s, size_t max_bytes = 400) {
  auto r = SplitSentences(s, max_bytes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : V{};
}

TEST(SentenceSplit, EndsAndExceptions) {
  EXPECT_EQ(Split("Hello there. How are you? Fine!  Thanks; bye"),
            (V{"Hello there.", "How are you?", "Fine!", "Thanks;", "bye"}));
  EXPECT_EQ(Split("Mr. Smith met Dr. Jones at 3.15 p.m. today. J. R. R. Tolkien wrote it, e.g. this one."),
            (V{"Mr. Smith met Dr. Jones at 3.15 p.m. today.", "J. R. R. Tolkien wrote it, e.g. this one."}));
  EXPECT_EQ(Split("It cost $1.000. Really?! \"Yes.\" (Sure.) Next..."),
            (V{"It cost $1.000.", "Really?!", "\"Yes.\"", "(Sure.)", "Next..."}));
  EXPECT_EQ(Split("line one\nline two\n\n\nline three"), (V{"line one", "line two", "line three"}));
  EXPECT_EQ(Split("你好。今天天气很好！是吗？好"), (V{"你好。", "今天天气很好！", "是吗？", "好"}));
  EXPECT_EQ(Split("the end of a.b.c and www.example.com stays whole"),
            (V{"the end of a.b.c and www.example.com stays whole"}));
}

TEST(SentenceSplit, CapCutsAtCommasThenSpacesThenCharacters) {
  EXPECT_EQ(Split("one two, three four five six", 16), (V{"one two,", "three four five", "six"}));
  EXPECT_EQ(Split("abcdefghij", 4), (V{"abcd", "efgh", "ij"}));
  // A cut never falls inside a character: 你 is 3 bytes.
  EXPECT_EQ(Split("你你你你", 7), (V{"你你", "你你"}));
  EXPECT_EQ(Split("你你", 2), (V{"你", "你"}));
}

// A 5 000-word text of mixed sentences: every piece within the cap, and nothing lost or reordered (the
// pieces' non-space characters, joined, are the text's).
TEST(SentenceSplit, LongTextKeepsEveryCharacterInOrder) {
  const char* kWords[] = {"the",  "Mr.",  "3.14",  "reader's", "book,", "end.",
                          "why?", "yes!", "semi;", "你好。",   "e.g."};
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text += kWords[(i * 7 + i / 3) % 11];
    text += i % 97 == 96 ? "\n" : " ";
  }
  const V pieces = Split(text, 120);
  EXPECT_GT(pieces.size(), 300u);
  std::string joined, want;
  for (const std::string& p : pieces) {
    EXPECT_LE(p.size(), 120u);
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  for (char c : text) {
    if (c != ' ' && c != '\n') want += c;
  }
  std::erase_if(joined, [](char c) { return c == ' ' || c == '\n'; });
  EXPECT_EQ(joined, want);
}

TEST(SentenceSplit, HostileInput) {
  // 1 MB without punctuation or spaces: pieces of exactly the cap, covering every byte.
  const std::string big(1 << 20, 'a');
  const V pieces = Split(big, 300);
  ASSERT_EQ(pieces.size(), (size_t{1 << 20} + 299) / 300);
  size_t total = 0;
  for (const std::string& p : pieces) {
    EXPECT_LE(p.size(), 300u);
    total += p.size();
  }
  EXPECT_EQ(total, size_t{1} << 20);
  // Only punctuation and spaces: nothing to speak.
  EXPECT_TRUE(Split("... !!! ??? ;;; \n\n 。。 ,,,").empty());
  EXPECT_TRUE(Split("").empty());
  // Invalid UTF-8: an error naming the byte.
  auto bad = SplitSentences("fine \xff then", 100);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("byte 5"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(SplitSentences("x", 0).ok());
}

}  // namespace
}  // namespace lfmvox::text
