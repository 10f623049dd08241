package io.rdma4j.it.lab;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How a guest JVM's JUnit XML report is judged: only executed, passing, unskipped tests count as a pass. */
class GuestReportTest {

    @TempDir
    Path reports;

    @Test
    void passingTestsPass() throws Exception {
        write("""
                <testsuite tests="2"><testcase classname="a.XGuestTest" name="one()"/>
                <testcase classname="a.XGuestTest" name="two()"/></testsuite>""");

        GuestReport report = GuestReport.read("rxe0", reports);

        assertThat(report.executed()).isEqualTo(2);
        assertThat(report.problems()).isEmpty();
        assertThat(report.passed()).isTrue();
    }

    @Test
    void failuresAndErrorsAreReportedWithTheirMessages() throws Exception {
        write("""
                <testsuite><testcase classname="a.XGuestTest" name="one()">
                <failure message="expected PORT_ACTIVE" type="AssertionError">stack line 1</failure></testcase>
                <testcase classname="a.XGuestTest" name="two()"><error message="boom" type="IOException"/></testcase>
                </testsuite>""");

        GuestReport report = GuestReport.read("siw0", reports);

        assertThat(report.passed()).isFalse();
        assertThat(report.problems()).hasSize(2);
        assertThat(report.problems().get(0)).contains("siw0", "a.XGuestTest.one()", "failure", "expected PORT_ACTIVE",
                "stack line 1");
        assertThat(report.problems().get(1)).contains("a.XGuestTest.two()", "error", "boom");
    }

    @Test
    void aSkippedGuestTestIsAProblem() throws Exception {
        write("""
                <testsuite><testcase classname="a.XGuestTest" name="one()"><skipped message="assumption"/></testcase>
                </testsuite>""");

        GuestReport report = GuestReport.read("rxe0", reports);

        assertThat(report.passed()).isFalse();
        assertThat(report.problems()).singleElement().asString().contains("skipped", "assumption");
    }

    @Test
    void noExecutedTestsIsNotAPass() throws Exception {
        write("<testsuite tests=\"0\"/>");

        assertThat(GuestReport.read("rxe0", reports).passed()).isFalse();
    }

    @Test
    void missingReportsAreAProblem() throws Exception {
        GuestReport empty = GuestReport.read("rxe0", reports);
        GuestReport absent = GuestReport.read("rxe0", reports.resolve("absent"));

        assertThat(empty.passed()).isFalse();
        assertThat(empty.problems()).singleElement().asString().contains("no TEST-*.xml");
        assertThat(absent.passed()).isFalse();
        assertThat(absent.problems()).singleElement().asString().contains("no JUnit reports");
    }

    private void write(String xml) throws Exception {
        Files.writeString(reports.resolve("TEST-junit-jupiter.xml"), "<?xml version=\"1.0\"?>\n" + xml);
    }
}
