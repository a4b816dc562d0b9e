package main

// Images, documents, voice notes and files made by tools through the whole
// App (issue 15), against the fake platforms and the fake LLM.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator/media/mediatest"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// visionCatalog gives the fake model the vision capability.
func visionCatalog(y string) string {
	return strings.Replace(y, "fake/small: { alias: small, weight: 80, context_window: 8000 }",
		"fake/small: { alias: small, weight: 80, context_window: 8000, capabilities: [vision, tools] }", 1)
}

// photo is a small JPEG.
func photo(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for x := 0; x < 64; x++ {
		img.Set(x, x%48, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lastUser is the last user message the LLM was shown.
func lastUser(t *testing.T, llm *providertest.Server) core.ChatMessage {
	t.Helper()
	r, ok := llm.Last()
	if !ok {
		t.Fatal("the LLM was not called")
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == core.RoleUser {
			return r.Messages[i]
		}
	}
	t.Fatal("no user message in the LLM request")
	return core.ChatMessage{}
}

// TestE2EPhotoReachesTheModelAsAnImage: a Telegram photo with a caption
// reaches a vision model as an image part of the photo's type and size;
// /retry shows it again from the media store without downloading it.
func TestE2EPhotoReachesTheModelAsAnImage(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)))))
	alice := telegramtest.User(50, "alice")
	jpg := photo(t)
	id := bot.AddFile(jpg)
	bot.AddUpdate(bot.Photo(alice, id, len(jpg), "what is in this picture?"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if !strings.Contains(sent[0].Text, "echo: what is in this picture?") {
		t.Fatalf("answer %q; want the LLM's echo of the caption", sent[0].Text)
	}
	u := lastUser(t, llm)
	if len(u.Attachments) != 1 {
		t.Fatalf("the LLM got %d images; want the photo", len(u.Attachments))
	}
	if a := u.Attachments[0]; a.MIME != "image/jpeg" || a.Size != int64(len(jpg)) || !bytes.Equal(a.Data, jpg) {
		t.Fatalf("image part %s of %d bytes; want the photo: image/jpeg, %d bytes", a.MIME, a.Size, len(jpg))
	}
	if r, _ := llm.Last(); !strings.Contains(string(r.Body), `"type":"image_url"`) {
		t.Fatalf("request body has no image_url part")
	}

	bot.AddUpdate(bot.Private(alice, "/retry"))
	bot.WaitSent(t, 2, 20*time.Second)
	if u := lastUser(t, llm); len(u.Attachments) != 1 || !bytes.Equal(u.Attachments[0].Data, jpg) {
		t.Fatalf("the re-answer showed the LLM %d images; want the photo again", len(u.Attachments))
	}
	if n := len(bot.Calls("getFile")); n != 1 {
		t.Fatalf("getFile called %d times; the photo is kept in the media store and downloaded once", n)
	}
}

// TestE2EAlbumReachesTheModelAsOneMessage: three photos sent together
// (a Telegram album: an update each, one media_group_id, the caption on
// the first) are one question with three images, answered once.
func TestE2EAlbumReachesTheModelAsOneMessage(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)))))
	alice := telegramtest.User(51, "alice")
	jpg := photo(t)
	var last int64
	for _, caption := range []string{"which one is sharpest?", "", ""} {
		u := bot.Photo(alice, bot.AddFile(jpg), len(jpg), caption)
		u.Message.MediaGroupID = "album-1"
		last = bot.AddUpdate(u)
	}
	sent := bot.WaitSent(t, 1, 20*time.Second)
	bot.WaitFor(t, "the offset past the album", 20*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return bot.Confirmed() > last })
	if !strings.Contains(sent[0].Text, "echo: which one is sharpest?") {
		t.Fatalf("answer %q; want the LLM's echo of the caption", sent[0].Text)
	}
	if u := lastUser(t, llm); len(u.Attachments) != 3 {
		t.Fatalf("the LLM got %d images; want the album's three", len(u.Attachments))
	}
	if n, answers := llm.Count(), bot.SentCount(); n != 1 || answers != 1 {
		t.Fatalf("%d LLM calls and %d answers; want one of each for the album", n, answers)
	}
}

// TestE2EImageWithoutVisionModel: with no model that sees, a photo is
// answered with one sentence, without calling the LLM or downloading it.
func TestE2EImageWithoutVisionModel(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	jpg := photo(t)
	id := bot.AddFile(jpg)
	bot.AddUpdate(bot.Photo(telegramtest.User(51, "alice"), id, len(jpg), "look"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if !strings.Contains(sent[0].Text, "none of my models can look at images") || strings.Count(sent[0].Text, ".") != 1 {
		t.Fatalf("answer %q; want the one sentence that no model can see images", sent[0].Text)
	}
	if n := llm.Count(); n != 0 {
		t.Fatalf("the LLM was called %d times; want none", n)
	}
	if n := len(bot.Calls("getFile")); n != 0 {
		t.Fatalf("the photo was fetched (%d getFile calls); nothing needs it", n)
	}
}

// TestE2EUncompressedPhotoReachesAnthropic: a photo sent as a file (no
// Telegram compression) is larger than Anthropic takes (5 MB of base64);
// it reaches the model re-encoded within that, and the user gets the
// answer instead of the provider's 400.
func TestE2EUncompressedPhotoReachesAnthropic(t *testing.T) {
	t.Parallel()
	llm := providertest.NewAnthropic(t)
	bot := telegramtest.New(t, tgToken)
	cfg := strings.Replace(visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)), "api: openai-completions", "api: anthropic-messages", 1)
	startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	img := image.NewNRGBA(image.Rect(0, 0, 1400, 1100))
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := range img.Pix {
		img.Pix[i] = byte(rnd.Uint32()) // noise: it does not compress
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if b.Len() < 5<<20 {
		t.Fatalf("the PNG is %d bytes; the test needs one over Anthropic's 5 MB", b.Len())
	}
	id := bot.AddFile(b.Bytes())
	bot.AddUpdate(bot.Document(telegramtest.User(54, "alice"), id, "IMG_0001.png", "image/png", b.Len(), "what is in this picture?"))
	sent := bot.WaitSent(t, 1, 60*time.Second)
	if !strings.Contains(sent[0].Text, "echo: what is in this picture?") {
		t.Fatalf("answer %q; want the LLM's echo of the caption", sent[0].Text)
	}
	u := lastUser(t, llm)
	if len(u.Attachments) != 1 || u.Attachments[0].MIME != "image/jpeg" {
		t.Fatalf("the LLM got %+v; want the photo as a JPEG", u.Attachments)
	}
	cfgImg, err := jpeg.DecodeConfig(bytes.NewReader(u.Attachments[0].Data))
	if err != nil || cfgImg.Width != 1400 || cfgImg.Height != 1100 {
		t.Fatalf("image %d×%d (%v); want the photo's 1400×1100", cfgImg.Width, cfgImg.Height, err)
	}
	fitted := u.Attachments[0].Data

	// /retry shows the model the same re-encoded photo, not downloaded again.
	bot.AddUpdate(bot.Private(telegramtest.User(54, "alice"), "/retry"))
	bot.WaitSent(t, 2, 60*time.Second)
	if u := lastUser(t, llm); len(u.Attachments) != 1 || !bytes.Equal(u.Attachments[0].Data, fitted) {
		t.Fatalf("the re-answer showed the LLM %d images; want the re-encoded photo again", len(u.Attachments))
	}
	if n := len(bot.Calls("getFile")); n != 1 {
		t.Fatalf("getFile called %d times; want one", n)
	}
}

// TestE2EStickerAndVideoNote: a Telegram sticker alone reaches a vision
// model as a WebP image; a video note alone is answered with the
// cannot-read sentence, without the LLM and without downloading it.
// Before, both were dropped as empty messages and the user heard nothing.
func TestE2EStickerAndVideoNote(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)))))
	alice := telegramtest.User(55, "alice")
	webp := []byte("RIFF\x24\x00\x00\x00WEBPVP8 \x18\x00\x00\x00 a small sticker")
	u := bot.Private(alice, "")
	u.Message.Sticker = &models.Sticker{FileID: bot.AddFile(webp), Type: "regular", Emoji: "👍", FileSize: len(webp)}
	bot.AddUpdate(u)
	bot.WaitSent(t, 1, 20*time.Second)
	if a := lastUser(t, llm).Attachments; len(a) != 1 || a[0].MIME != "image/webp" || !bytes.Equal(a[0].Data, webp) {
		t.Fatalf("the LLM got %+v; want the sticker as a WebP image", a)
	}

	v := bot.Private(alice, "")
	v.Message.VideoNote = &models.VideoNote{FileID: bot.AddFile([]byte("not really a video")), Length: 240, Duration: 3, FileSize: 18}
	bot.AddUpdate(v)
	sent := bot.WaitSent(t, 2, 20*time.Second)
	if !strings.Contains(sent[1].Text, "I cannot read this kind of file (video_note.mp4, video/mp4)") {
		t.Fatalf("answer %q; want the cannot-read sentence for the video note", sent[1].Text)
	}
	if n, gets := llm.Count(), len(bot.Calls("getFile")); n != 1 || gets != 1 {
		t.Fatalf("%d LLM calls and %d downloads; want only the sticker's", n, gets)
	}
}

// TestE2EVoiceNoteTranscribedThenAnswered: a voice note goes to the
// transcription endpoint (media.transcription.model), its transcript is
// answered by the LLM and, with echo on, shown ahead of the answer.
func TestE2EVoiceNoteTranscribedThenAnswered(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.Audio != nil {
			return providertest.Script{Text: "turn on the kitchen lights"}
		}
		return providertest.Echo(r)
	})
	bot := telegramtest.New(t, tgToken)
	cfg := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL) + "media:\n  transcription:\n    model: fake/whisper-1\n    echo: true\n"
	startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	voice := []byte("OggS\x00\x02fake-opus-voice-note-bytes")
	id := bot.AddFile(voice)
	bot.AddUpdate(bot.Voice(telegramtest.User(52, "alice"), id, len(voice)))
	sent := bot.WaitSent(t, 1, 20*time.Second)

	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d LLM requests; want the transcription, then the answer", len(reqs))
	}
	if tr := reqs[0]; tr.Path != "/v1/audio/transcriptions" || tr.Model != "whisper-1" || !bytes.Equal(tr.Audio, voice) || tr.APIKey != "test-key" {
		t.Fatalf("transcription request %s model %q with %d bytes; want the voice note's %d bytes to whisper-1", tr.Path, tr.Model, len(tr.Audio), len(voice))
	}
	if !strings.Contains(reqs[1].LastUser(), "turn on the kitchen lights") {
		t.Fatalf("the LLM answered %q; want the transcript", reqs[1].LastUser())
	}
	if text := sent[0].Text; !strings.Contains(text, "turn on the kitchen lights") || !strings.Contains(text, "echo: ") {
		t.Fatalf("answer %q; want the transcript shown ahead of the answer", text)
	}
}

// TestE2EOversizedFileRefused: a document larger than media.max_bytes is
// refused with a clear message naming it, before anything is downloaded,
// whether the platform declares its size in the message or only in
// getFile.
func TestE2EOversizedFileRefused(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	cfg := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL) + "media:\n  max_bytes: 4096\n"
	startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	alice := telegramtest.User(53, "alice")
	big := bytes.Repeat([]byte("all work and no play\n"), 1000) // 21 KB
	id := bot.AddFile(big)

	bot.AddUpdate(bot.Document(alice, id, "notes.txt", "text/plain", len(big), "summarize"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if !strings.Contains(sent[0].Text, "notes.txt") || !strings.Contains(sent[0].Text, "is too large: it is larger than the 4 KB limit I accept") {
		t.Fatalf("answer %q; want notes.txt refused as larger than the limit", sent[0].Text)
	}
	if n := len(bot.Calls("getFile")); n != 0 {
		t.Fatalf("getFile called %d times for a file declared too large", n)
	}

	bot.AddUpdate(bot.Document(alice, id, "more.txt", "text/plain", 0, "and this one"))
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if !strings.Contains(sent[1].Text, "more.txt") || !strings.Contains(sent[1].Text, "larger than") {
		t.Fatalf("answer %q; want more.txt refused too", sent[1].Text)
	}
	if n := bot.Served(id); n != 0 {
		t.Fatalf("%d bytes downloaded; nothing should be past the limit", n)
	}
	if n := llm.Count(); n != 0 {
		t.Fatalf("the LLM was called %d times; want none", n)
	}
}

// minimalPDF is a one-page PDF showing text (Helvetica), with a correct
// cross-reference table.
func minimalPDF(text string) []byte {
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// TestE2EDocumentsBecomeContext: a PDF's text and a CSV reach the LLM as
// context for the turn; a zip gets the clear "cannot read" reply.
func TestE2EDocumentsBecomeContext(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	alice := telegramtest.User(54, "alice")

	pdf := minimalPDF("Quarterly revenue was 42 million")
	bot.AddUpdate(bot.Document(alice, bot.AddFile(pdf), "report.pdf", "application/pdf", len(pdf), "what was the revenue?"))
	bot.WaitSent(t, 1, 20*time.Second)
	if u := lastUser(t, llm).Content; !strings.Contains(u, "what was the revenue?") || !strings.Contains(u, "Quarterly revenue was 42 million") || !strings.Contains(u, "report.pdf") {
		t.Fatalf("the LLM saw %q; want the question and the PDF's text", u)
	}

	csv := []byte("city,temp\nOslo,3\nRome,19\n")
	bot.AddUpdate(bot.Document(alice, bot.AddFile(csv), "temps.csv", "text/csv", len(csv), ""))
	bot.WaitSent(t, 2, 20*time.Second)
	if u := lastUser(t, llm).Content; !strings.Contains(u, "Rome,19") {
		t.Fatalf("the LLM saw %q; want the CSV", u)
	}

	calls := llm.Count()
	bot.AddUpdate(bot.Document(alice, bot.AddFile([]byte("PK\x03\x04zip")), "archive.zip", "application/zip", 7, ""))
	sent := bot.WaitSent(t, 3, 20*time.Second)
	if !strings.Contains(sent[2].Text, "cannot read this kind of file") || !strings.Contains(sent[2].Text, "archive.zip") {
		t.Fatalf("answer %q; want the clear cannot-read reply", sent[2].Text)
	}
	if llm.Count() != calls {
		t.Fatal("the zip reached the LLM")
	}
}

// TestE2EPDFBombIsRefused: a PDF of a few hundred KB whose page expands to
// 256 MB (which read in-process allocated gigabytes and, a little larger,
// ended the gateway with a fatal out-of-memory error) is answered with a
// reason, read by the confined helper process; the gateway answers the
// next message as usual.
func TestE2EPDFBombIsRefused(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	alice := telegramtest.User(55, "alice")

	bomb := mediatest.PDF(mediatest.TextPage("Invoice 7"), mediatest.BombPage(256))
	bot.AddUpdate(bot.Document(alice, bot.AddFile(bomb), "invoice.pdf", "application/pdf", len(bomb), "pay this"))
	sent := bot.WaitSent(t, 1, 30*time.Second)
	if !strings.Contains(sent[0].Text, "I could not read invoice.pdf") || !strings.Contains(sent[0].Text, "expand to more than 64 MB") {
		t.Fatalf("answer %q; want the PDF refused with its reason", sent[0].Text)
	}
	if n := llm.Count(); n != 0 {
		t.Fatalf("the LLM was called %d times; want none", n)
	}
	bot.AddUpdate(bot.Private(alice, "hello after the bomb"))
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if !strings.Contains(sent[1].Text, "hello after the bomb") {
		t.Fatalf("answer %q; want the next message answered", sent[1].Text)
	}
}

// chartLLM asks for chart.bars when offered and no tool result is in yet,
// then answers.
func chartLLM(r providertest.Received) providertest.Script {
	if last := r.Messages[len(r.Messages)-1]; last.Role == core.RoleTool {
		return providertest.Script{Text: "Here is your chart."}
	}
	for _, tool := range r.Tools {
		if tool.Plugin == "chart" && tool.Action == "bars" {
			return providertest.Script{ToolCalls: []core.ToolCall{{Plugin: "chart", Action: "bars", Args: map[string]string{"values": "3,1,4,1,5"}}}}
		}
	}
	return providertest.Echo(r)
}

// chartPluginDir builds the chart example plugin into a plugin_dir.
func chartPluginDir(t *testing.T) string {
	bin := pluginBinary(t, "../../plugins/examples/chart")
	dir := plugintest.Dir(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chart"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkChartUpload checks an uploaded file is the chart the plugin drew:
// a 400×240 PNG whose SHA-256 is the one its reply recorded, the upload
// being in the delivery log under its platform id.
func checkChartUpload(t *testing.T, h *harness, channel, platformID string, data []byte, name string) {
	t.Helper()
	if name != "chart.png" {
		t.Errorf("uploaded as %q; want chart.png", name)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the upload is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 240 {
		t.Fatalf("the upload is %v; want the 400x240 chart", b)
	}
	sum := sha256.Sum256(data)
	r := deliveredReply(t, h, channel, platformID)
	if len(r.Files) != 1 || r.Files[0].SHA256 != hex.EncodeToString(sum[:]) || r.Sent[len(r.Parts)] != platformID {
		t.Fatalf("the reply's files %+v, sent %v; want the uploaded bytes' SHA-256 recorded as part %d", r.Files, r.Sent, len(r.Parts))
	}
	if !strings.Contains(r.Text, "Here is your chart.") {
		t.Fatalf("reply %q; want the LLM's answer", r.Text)
	}
}

// TestE2EPluginPNGUploadedOnEveryPlatform: a tool plugin returns a PNG;
// it is uploaded with the answer on Telegram (sendPhoto), Slack (the
// external upload flow) and Discord (an attachment), with the plugin's
// bytes, and recorded in the delivery log.
func TestE2EPluginPNGUploadedOnEveryPlatform(t *testing.T) {
	t.Parallel()
	dir := chartPluginDir(t)
	plugins := "plugins:\n  tools:\n    plugin_dir: " + dir + "\n"

	t.Run("telegram", func(t *testing.T) {
		llm := providertest.NewOpenAI(t)
		llm.SetReply(chartLLM)
		bot := telegramtest.New(t, tgToken)
		h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)+plugins)))
		bot.AddUpdate(bot.Private(telegramtest.User(60, "alice"), "chart 3 1 4 1 5"))
		bot.WaitFor(t, "the chart", 30*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return len(bot.Uploads()) == 1 })
		up := bot.Uploads()[0]
		if up.Method != "sendPhoto" || up.ChatID != 60 {
			t.Fatalf("uploaded with %s to chat %d; want sendPhoto to chat 60", up.Method, up.ChatID)
		}
		checkChartUpload(t, h, "telegram", fmt.Sprintf("60:%d", up.MessageID), up.Data, up.Name)
		if s := bot.Sent(); len(s) != 1 || !strings.Contains(s[0].Text, "Here is your chart.") {
			t.Fatalf("text sent %+v; want the answer with the chart", s)
		}
	})

	t.Run("slack", func(t *testing.T) {
		llm := providertest.NewOpenAI(t)
		llm.SetReply(chartLLM)
		srv := slacktest.New(t, slackBotToken, slackAppToken)
		h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n")+plugins)))
		srv.WaitConnected(t, 1, 20*time.Second)
		env := srv.Deliver(srv.Mention("alice", "C1", "chart 3 1 4 1 5", ""))
		srv.WaitFor(t, "the chart", 30*time.Second, func() bool { return len(srv.Uploads()) == 1 })
		up := srv.Uploads()[0]
		if up.Channel != "C1" || up.Thread != env.TS {
			t.Fatalf("shared in %s thread %q; want C1's thread %s", up.Channel, up.Thread, env.TS)
		}
		if n := len(srv.Calls("files.getUploadURLExternal")); n != 1 {
			t.Fatalf("files.getUploadURLExternal called %d times", n)
		}
		checkChartUpload(t, h, "slack", "file:"+up.ID, up.Data, up.Name)
	})

	t.Run("discord", func(t *testing.T) {
		llm := providertest.NewOpenAI(t)
		llm.SetReply(chartLLM)
		dc := discordtest.New(t, dcToken)
		guild := dc.Guild()
		ch := dc.TextChannel(guild)
		h := startApp(t, loadConfigFile(t, writeConfig(t, discordConfig(t.TempDir(), llm.BaseURL(), dc.URL, "")+plugins)))
		alice := dc.User("alice")
		dc.Message(t, discordtest.Msg{Channel: ch, Guild: guild, Author: alice,
			Content: discordtest.Mention(dc.Bot) + " chart 3 1 4 1 5", Mentions: []discordtest.User{dc.Bot}})
		dc.WaitFor(t, "the chart", func() bool { return len(dc.Uploads()) == 1 })
		up := dc.Uploads()[0]
		if up.ChannelID != ch || up.ContentType != "image/png" {
			t.Fatalf("attached in %s as %s; want channel %s, image/png", up.ChannelID, up.ContentType, ch)
		}
		checkChartUpload(t, h, "discord", up.MessageID, up.Data, up.Name)
	})
}

// TestE2EMediaKeptByTheBlobPlugin: with plugins.blobs.plugin the files a
// message brings are kept by the plugin too (the ops example keeps them
// in its state), under media/<sha256>. (The key was accepted and nothing
// was ever put.)
func TestE2EMediaKeptByTheBlobPlugin(t *testing.T) {
	t.Parallel()
	bin := pluginBinary(t, "../../plugins/examples/ops")
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	cfg := visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)) + "plugins:\n  tools:\n    plugins: [" + bin + "]\n  blobs:\n    plugin: ops\n"
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitPlugins(t, h.app, "ops")
	jpg := photo(t)
	sum := sha256.Sum256(jpg)
	bot.AddUpdate(bot.Photo(telegramtest.User(50, "alice"), bot.AddFile(jpg), len(jpg), "what is in this picture?"))
	bot.WaitSent(t, 1, 20*time.Second)
	got, err := h.app.Blobs().Get(context.Background(), "media/"+hex.EncodeToString(sum[:]))
	if err != nil || !bytes.Equal(got, jpg) {
		t.Fatalf("the blob plugin's media/<sha256> of the photo: %d bytes, %v; want the photo", len(got), err)
	}
}
